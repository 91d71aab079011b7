"""The committed libs/wire/v1 modules are exactly what `make protos` generates now."""

from __future__ import annotations

from pathlib import Path

from epochal.wire.codegen import generate

COMMITTED = Path(__file__).resolve().parents[2] / "libs" / "wire" / "v1"


def test_generated_code_is_in_sync_with_the_protos(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert written, "nothing was generated"
    stale = [p.name for p in written if p.read_bytes() != (COMMITTED / p.name).read_bytes()]
    generated = {p.name for p in written}
    committed = {p.name for p in COMMITTED.iterdir() if p.suffix in {".py", ".pyi"}} - {
        "__init__.py"
    }
    assert not stale, f"run `make protos` and commit: {stale} differ from the .proto files"
    assert committed == generated, f"stale generated files: {sorted(committed - generated)}"
