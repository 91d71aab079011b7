"""Reconcilers announce their address in the metadata log, as real processes: 3 CMS members, a
replica and two reconcilers on 127.0.0.1.

Proves: a reconciler that reports SERVING is already named in the metadata at its address (its
``--listen`` by default, else its ``--advertise``); one restarted after a SIGKILL finds itself
registered and commits nothing; one stopped by SIGTERM deregisters, quietly and within its grace
period, and no longer appears; one killed by SIGKILL stays registered.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochal.client import AsyncClient
from epochal.devcluster.cluster import LocalCluster
from epochal.runtime.processes import LocalProcess
from tests.harness import GRACE_S, assert_quiet, latest, run, signal_and_time_exit, start_ring

pytestmark = pytest.mark.integration

SERVING_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "cluster", replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.close()


async def start(cluster: LocalCluster, reconciler: LocalProcess) -> None:
    cluster.start_reconciler(reconciler.name)
    await reconciler.wait_serving(time.monotonic() + SERVING_S)


def test_reconcilers_register_their_address_and_only_a_clean_stop_deregisters(
    cluster: LocalCluster,
) -> None:
    async def scenario() -> None:
        await start_ring(cluster)
        first, second = cluster.add_reconciler(), cluster.add_reconciler()
        advertised = "localhost:" + second.address.rpartition(":")[2]
        await start(cluster, first)
        cluster.reconciler_args = ("--advertise", advertised)
        await start(cluster, second)
        async with AsyncClient(cluster.addresses) as client:
            # Registered before SERVING: the metadata names both as soon as they serve.
            metadata = await latest(cluster, client)
            assert dict(metadata.reconcilers) == {
                first.name: first.address,
                second.name: advertised,
            }

            # SIGKILL then a restart: it finds itself registered and commits nothing.
            second.kill()
            registered_at = (await latest(cluster, client)).epoch
            await start(cluster, second)
            assert "is registered at " + advertised + " already" in second.log_path.read_text()
            assert (await latest(cluster, client)).epoch == registered_at

            # SIGTERM: it deregisters within its grace period and no longer appears.
            exited = await signal_and_time_exit(first, signal.SIGTERM, GRACE_S + 5)
            assert_quiet(exited.logged, first.name)
            deregistered = f"deregistered {first.name} from {first.address}"
            assert any(deregistered in line for line in exited.logged), exited.logged
            assert exited.seconds < GRACE_S
            assert dict((await latest(cluster, client)).reconcilers) == {second.name: advertised}

            # SIGKILL: it stays registered (and shows unreachable to whoever looks).
            second.kill()
            metadata = await latest(cluster, client)
            assert dict(metadata.reconcilers) == {second.name: advertised}

    run(cluster, scenario, timeout_s=180)
