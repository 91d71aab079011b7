"""Lay out the installed package tree for mypy: ``OUT/epochal`` with symlinks to the folders
pyproject's ``package-dir`` maps each package from (``epochal`` -> libs/epochal, ``epochal.tcm``
-> libs/tcm, …). mypy cannot follow the editable install's import hook, so ``make lint`` runs it
in this tree. Usage: python .ci/mypy_tree.py OUT"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out: Path) -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    shutil.rmtree(out, ignore_errors=True)
    top = out / "epochal"
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["epochal"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        inner = name.split(".")[1:]
        if len(inner) == 1 and not (top / inner[0]).exists():
            (top / inner[0]).symlink_to(ROOT / folder)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
