"""The layering rules of DESIGN.md "Principles" and "Layout", held by reading the source.

- The pure cores (paxos, tcm, mtrack, the CMS member core) and the error family import no
  I/O, clock or randomness, however indirectly.
- Generated protobuf code is imported only at the edges: libs/wire, each service's gRPC layer
  (servicers, their codecs, the server and its peer channels) and the SDK's transport.
- Every expected error has one definition: no two exception classes of any epochal module
  share a name.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "libs", ROOT / "services"]
FORBIDDEN_IN_CORES = ("asyncio", "grpc", "sqlalchemy", "opentelemetry", "time", "random")

PROTOBUF_EDGES = {
    "libs/epochal/admin_encoding.py",  # the SDK's transport: a replica's admin calls,
    "libs/epochal/cms_client.py",  # to the CMS,
    "libs/epochal/encoding.py",  # the SDK's requests and replies,
    "libs/epochal/probes.py",  # gRPC health and reflection of any process,
    "libs/epochal/reconcile_client.py",  # reconcilers' status,
    "libs/epochal/sessions.py",  # and its streams to replicas
    "services/cms/codec.py",
    "services/cms/peers.py",
    "services/cms/server.py",
    "services/cms/servicer.py",
    "services/replica/codec.py",
    "services/replica/exchange_codec.py",
    "services/replica/peer_client.py",
    "services/replica/server.py",
    "services/replica/admin_servicer.py",
    "services/replica/client_servicer.py",
    "services/replica/peer_servicer.py",
    "services/replica/reconcile_servicer.py",
    "services/reconciler/replica_client.py",
    "services/reconciler/server.py",
}
# Modules that still handle protobuf past the edge: issue 18 ("protobuf only at the edges")
# moves each behind a domain value. The test fails when one is fixed and still listed, too.
NOT_YET_AT_THE_EDGE: set[str] = set()


def python_files() -> list[Path]:
    return sorted(
        path
        for source in SOURCES
        for path in source.rglob("*.py")
        if "wire/v1" not in path.as_posix() and "migrations" not in path.parts
    )


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def imports_generated_code(path: Path) -> bool:
    return any(
        name.startswith("epochal.wire.v1") or name.endswith(("_pb2", "_pb2_grpc"))
        for name in imported_modules(path)
    )


def test_the_pure_cores_import_no_io_clock_or_randomness_even_indirectly() -> None:
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import epochal.errors, epochal.mtrack, epochal.paxos, epochal.tcm, epochal.cmscore\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout
    )
    assert "epochal.paxos.node" in loaded
    assert "epochal.cmscore.core" in loaded
    offending = [m for m in loaded if m.split(".")[0] in FORBIDDEN_IN_CORES]
    assert offending == []


def test_no_module_of_a_pure_core_imports_io_clock_or_randomness() -> None:
    """The subprocess check above cannot see a module the interpreter loads at start (time),
    so each core module's own imports are read too."""
    core_files = [
        *(ROOT / "libs/paxos").glob("*.py"),
        *(ROOT / "libs/tcm").glob("*.py"),
        *(ROOT / "libs/mtrack").glob("*.py"),
        *(ROOT / "libs/cmscore").glob("*.py"),
        ROOT / "libs/epochal/errors.py",
    ]
    offending = {
        path.relative_to(ROOT).as_posix(): sorted(
            name for name in imported_modules(path) if name.split(".")[0] in FORBIDDEN_IN_CORES
        )
        for path in core_files
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_generated_protobuf_code_is_imported_only_at_the_edges() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in python_files()
        if not path.relative_to(ROOT).as_posix().startswith("libs/wire/")
        and imports_generated_code(path)
    }
    assert importers - PROTOBUF_EDGES == NOT_YET_AT_THE_EDGE


def test_the_sdk_handles_protobuf_only_in_its_transport() -> None:
    """The SDK's edges are exactly those listed: one that no longer needs generated code leaves
    the list, so the list says where the SDK meets the wire."""
    sdk = ROOT / "libs/epochal"
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in sdk.glob("*.py")
        if imports_generated_code(path)
    }
    assert importers == {edge for edge in PROTOBUF_EDGES if edge.startswith("libs/epochal/")}


def test_every_exception_class_has_one_definition() -> None:
    defined: dict[str, list[str]] = {}
    for module_name in epochal_modules():
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module_name
            ):
                defined.setdefault(name, []).append(module_name)
    twice = {name: places for name, places in defined.items() if len(places) > 1}
    assert twice == {}
    assert "EpochalError" in defined and "Rejected" in defined  # the walk saw the family


def epochal_modules() -> list[str]:
    import epochal

    return sorted(
        info.name
        for info in pkgutil.walk_packages(epochal.__path__, "epochal.")
        if ".wire.v1" not in info.name
        and ".migrations" not in info.name
        and not info.name.endswith("__main__")
    )
