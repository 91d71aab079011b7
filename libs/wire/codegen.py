"""Generate the protobuf/gRPC modules of protos/epochal/wire/v1 into a folder.

protoc runs with ``-Iprotos``, so generated modules import each other as ``epochal.wire.v1.…``;
the files are then flattened into the target folder (``libs/wire/v1`` for ``make protos``, a
temporary folder for the test that checks the committed files are current).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parents[2] / "protos"
PROTO_PACKAGE = Path("epochal/wire/v1")


def proto_files(proto_root: Path = PROTO_ROOT) -> list[Path]:
    return sorted((proto_root / PROTO_PACKAGE).glob("*.proto"))


def generate(target: Path, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Write the generated modules for every .proto into ``target``; return the files written."""
    from grpc_tools import protoc  # dev dependency, pinned exactly in pyproject.toml

    sources = proto_files(proto_root)
    if not sources:
        raise FileNotFoundError(f"no .proto files under {proto_root / PROTO_PACKAGE}")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        include = Path(protoc.__file__).parent / "_proto"
        args = [
            "protoc",
            f"-I{proto_root}",
            f"-I{include}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            *(str(p.relative_to(proto_root)) for p in sources),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed: " + " ".join(args))
        written = []
        for produced in sorted((Path(scratch) / PROTO_PACKAGE).iterdir()):
            destination = target / produced.name
            shutil.copyfile(produced, destination)
            written.append(destination)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m epochal.wire.codegen TARGET_DIR", file=sys.stderr)
        return 2
    for path in generate(Path(args[0])):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
