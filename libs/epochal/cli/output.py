"""How commands print: data on stdout — a table for people, JSON or YAML for scripts — and
progress and errors on stderr.

Text is printed as it is (no rich markup: a range ``(a, b]`` stays one). A command builds its
answer once as plain data (the JSON shape README.md documents) and a table
from the same data; ``emit`` prints the one ``--output`` asks for. Tables are rich tables without
borders, like nodetool's; colour only when stdout is a terminal (and ``NO_COLOR`` is unset), and
no wrapping when it is not (a pipe gets whole lines).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import yaml
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

Columns = Sequence[str]  # a name; "> NAME" right-aligns the column


def stdout_console() -> Console:
    interactive = sys.stdout.isatty()
    return Console(
        file=sys.stdout,
        highlight=False,
        width=None if interactive else 100_000,
        soft_wrap=not interactive,
    )


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, stderr=True)


def table(columns: Columns, rows: Iterable[Sequence[Any]], title: str = "") -> Table:
    shown = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        title=title or None,
        title_justify="left",
        title_style="",
    )
    for name in columns:
        right = name.startswith("> ")
        shown.add_column(name.removeprefix("> "), justify="right" if right else "left")
    for row in rows:
        shown.add_row(*(Text("-" if cell is None or cell == "" else str(cell)) for cell in row))
    return shown


def render(items: Sequence[RenderableType | str]) -> str:
    """``items`` as the text a console prints (lines without trailing blanks)."""
    console = stdout_console()
    with console.capture() as captured:
        for index, item in enumerate(items):
            if index:
                console.print()
            console.print(Text(item) if isinstance(item, str) else item)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def emit(
    output: str,
    data: Any,
    shown: Callable[[], Sequence[RenderableType | str]],
    out: Callable[[str], None] = print,
) -> None:
    """Print ``data`` as ``output`` says: JSON, YAML, or the tables and lines ``shown`` makes."""
    if output == "json":
        out(json.dumps(data, indent=2))
    elif output == "yaml":
        out(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n"))
    else:
        out(render(shown()))


def percent(value: float) -> str:
    return f"{value:.1f}%"


def size(count: int | None) -> str:
    """Bytes as nodetool shows a load: ``12.3 KiB``."""
    if count is None:
        return "?"
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"
