"""Fuzz every gRPC method of a running cluster (tests/integration/fuzz.py), with mutual TLS and
a certificate of a role allowed to call it, then with wrong roles: no process exits, no call
hangs, every refusal is a clear status other than UNKNOWN or INTERNAL whose words are neither a
Python exception's nor an unbounded echo of the input (fuzz_answers.py), every call by a wrong
role is refused PERMISSION_DENIED, and refused input changes neither the metadata log nor the
data.

A short run in CI; ``make fuzz`` runs a long one (``EPOCHAL_FUZZ_INPUTS``, ``EPOCHAL_FUZZ_SEED``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from epochal.devcluster.cluster import LocalCluster
from epochal.devcluster.pki import DevPki
from epochal.wire.roles import ROLES

from .fuzz import run_fuzz
from .fuzz_messages import methods

pytestmark = pytest.mark.integration

INPUTS = int(os.environ.get("EPOCHAL_FUZZ_INPUTS", "1500"))
SEED = int(os.environ.get("EPOCHAL_FUZZ_SEED", "0"))


def test_every_method_refuses_bad_input_clearly_and_nothing_exits_or_hangs(
    tmp_path: Path, cluster_pki: DevPki
) -> None:
    cluster = LocalCluster(tmp_path / "cluster", pki=cluster_pki)
    certificates = {role: cluster_pki.files(f"fuzz-{role}", (role,)) for role in ROLES}
    try:
        result = asyncio.run(
            asyncio.wait_for(run_fuzz(cluster, INPUTS, SEED, certificates), 180 + INPUTS / 5)
        )
    finally:
        cluster.close()
    print(
        f"fuzz (seed {SEED}): {result.inputs} inputs in {result.seconds:.0f} s over "
        f"{len(result.by_method)} methods; kinds {dict(result.by_kind)}; roles "
        f"{dict(result.by_role)} and {result.wrong_role_calls} calls with a wrong role; statuses "
        f"{dict(result.by_code)}; {len(result.refused_tags)} refused writes and "
        f"{len(result.refused_entry_ids)} refused commits checked against {result.tags_checked} "
        f"rows ({result.data_check}) and the log; {result.exits} exits; "
        f"{len(result.violations)} violations; ran to the timeout: {dict(result.waited)}"
        + "".join(f"\n  {count} × {leak}" for leak, count in sorted(result.leaks.items()))
    )
    assert not result.violations, "\n".join(result.violations[:30])
    assert len(result.by_method) == len(methods())  # every method was called
    assert result.refused_tags and result.refused_entry_ids  # the oracle had work to do
    assert set(result.by_role) == set(ROLES)  # every role called what it may
    assert result.wrong_role_calls > 300  # and what it may not
