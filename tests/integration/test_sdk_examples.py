"""The SDK's examples run: every ``python`` block of the README's "The SDK" section and every
example in the SDK modules' docstrings, sync and async, against a real cluster (with the
examples' ``127.0.0.1:9001`` replaced by one of its replicas), in the order they are written,
each as a script of its own (nothing imported for it)."""

from __future__ import annotations

import asyncio
import importlib
import re
import textwrap
from pathlib import Path

import pytest

from epochal.devcluster.cluster import LocalCluster
from tests.harness import start_ring

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SEED = "127.0.0.1:9001"
# Modules whose docstrings hold examples, each an indented block of its own.
DOCUMENTED = ("epochal", "epochal.client", "epochal.sync_client", "epochal.policies")


def readme_examples() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The SDK\n") : text.index("## Errors and retries\n")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 5, "the README's SDK examples moved"
    return [(f"README example {n}", block) for n, block in enumerate(blocks, 1)]


def docstring_examples() -> list[tuple[str, str]]:
    """Each module's example: its indented paragraphs, in order, as one block."""
    examples = []
    for name in DOCUMENTED:
        doc = importlib.import_module(name).__doc__ or ""
        code = [
            textwrap.dedent(paragraph)
            for paragraph in re.split(r"\n\s*\n", doc)
            if paragraph.strip()
            and all(line.startswith("    ") for line in paragraph.splitlines() if line.strip())
        ]
        if code:
            examples.append((f"{name} docstring", "\n\n".join(code)))
    assert {where for where, _ in examples} == {f"{name} docstring" for name in DOCUMENTED}
    return examples


def runnable(code: str) -> str:
    """A docstring's async snippet inside a coroutine run to its end; anything else as is."""
    if "await " in code and "asyncio.run(" not in code:
        body = textwrap.indent(code, "    ")
        return f"import asyncio\n\n\nasync def example():\n{body}\n\n\nasyncio.run(example())\n"
    return code


def test_the_readme_and_docstring_examples_run(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        asyncio.run(asyncio.wait_for(start_ring(cluster, num_tokens=4), 120))
        for where, code in readme_examples() + docstring_examples():
            namespace: dict[str, object] = {"__name__": "__example__"}  # as a fresh script
            source = runnable(code).replace(SEED, cluster.addresses[0])
            try:
                exec(compile(source, where, "exec"), namespace)
            except Exception as error:
                raise AssertionError(f"{where} failed:\n{source}") from error
    finally:
        cluster.close()
