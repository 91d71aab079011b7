"""A replica's topology operations as domain values: what an operator asks of the replica's
``epochal.v1.ReplicaAdmin`` service and what it answers, what ``Replica.Describe`` says of the
node, and the switches of ``ReplicaTesting``. Pure: no gRPC, no protobuf.

The command line (``epochal.cli``) and the test harness (``epochal.devcluster``) build these
requests; ``epochal.admin_client.AdminClient`` sends them, and ``epochal.admin_encoding``
converts them at the wire's edge. The replica builds its ``OperationStatus`` from the same class.

Each operation request is named after its RPC and answered with the ``OperationStatus`` of the
operation once it has finished, failed or been aborted; ``Status`` asks for it at any time and
``Cleanup`` answers a ``CleanupResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

JOIN_REFUSED = "refused"  # the state of an automatic join the CMS refused for good


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationStatus:
    """What ``ReplicaAdmin.Status`` (and every operation's answer) says about the topology
    operation this node drives. The replica names every field; a field left out means nothing
    recorded (the wire's default, but for ``eta_s``: unknown)."""

    node_id: str = ""  # the node whose sequence it is
    epoch: int = 0  # this node's
    kind: str = ""  # join, leave, ... ("" when none is in progress or recorded)
    step: str = ""  # the last step taken
    # idle, running, waiting_for_barrier, streaming, finished, aborting, aborted, cancelled,
    # failed, interrupted; of an automatic join: waiting (for another operation's range
    # lock), retrying, refused (JOIN_REFUSED: for good)
    state: str = ""
    message: str = ""  # what it is doing or why it failed
    prepared_epoch: int = 0
    streamed_bytes: int = 0
    streamed_cells: int = 0
    streamed_mutations: int = 0
    ranges_done: int = 0
    ranges_total: int = 0
    eta_s: float = -1.0  # -1 when unknown
    barrier_level: str = ""  # the level the current (or last) barrier met or waits at
    reconciled_mutations: int = 0  # log entries the partial reconciliation brought


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True, kw_only=True)
class Bootstrap:
    """Join the ring (asked of the new node): at ``tokens``, else ``num_tokens`` the CMS
    allocates."""

    tokens: tuple[int, ...] = ()
    num_tokens: int = 0

    def __post_init__(self) -> None:
        if self.num_tokens < 0:
            raise ValueError(f"num_tokens must not be negative, not {self.num_tokens}")


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapResume:
    """Continue this node's interrupted join from its last step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapAbort:
    """Stop this node's join and undo its steps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decommission:
    """Leave the ring (asked of the leaving node)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecommissionAbort:
    """Stop this node's decommission and undo its steps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Remove:
    """Remove the dead node ``node_id`` (asked of any live node, which drives it)."""

    node_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Replace:
    """Take over the tokens of the dead node ``replaced`` (asked of the new node)."""

    replaced: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """Move this node to new ``tokens``."""

    tokens: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """Continue the interrupted sequence of ``node_id`` ("": this node's)."""

    node_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """Undo the sequence of ``node_id`` ("": this node's), one step per epoch."""

    node_id: str = ""


# The requests answered with the operation's final OperationStatus.
OperationRequest = (
    Bootstrap
    | BootstrapResume
    | BootstrapAbort
    | Decommission
    | DecommissionAbort
    | Remove
    | Replace
    | Move
    | Resume
    | Cancel
)


# --------------------------------------------------------------------------- the other calls


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """What this node's operation is doing (answered at once, with an ``OperationStatus``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleanup:
    """Delete the cells and log entries of ranges this node no longer replicates, once caught
    up to ``epoch`` (0: the epoch it has)."""

    epoch: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanupResult:
    epoch: int  # the metadata the owned ranges were read from
    removed: int  # cells and log entries deleted


# Everything ReplicaAdmin is asked.
AdminRequest = OperationRequest | Status | Cleanup


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaDescription:
    """What ``Replica.Describe`` says of the node."""

    node_id: str
    address: str
    datacenter: str
    rack: str
    epoch: int  # the metadata epoch it has applied
    ready: bool
    state: str  # its state in the directory ("joined", ...)
    hlc: int
    metrics: Mapping[str, float] = field(default_factory=dict)  # counters and gauges, by name
    cms_addresses: tuple[str, ...] = ()
    load_bytes: int = 0  # the bytes of its database pages in use (its load)


@dataclass(frozen=True, slots=True, kw_only=True)
class TestHooks:
    """``ReplicaTesting.SetHooks``: switches for tests, served only by a replica started with
    ``--enable-test-hooks`` (the proto says what each does)."""

    __test__ = False  # not a pytest class

    hold_metadata_pushes: bool = False
    skip_plan_recheck: bool = False
    stream_delay_ms: int = 0
    drop_write_share: float = 0.0
    isolated: bool = False
    id_clock_behind_ms: int = 0
    cut_off_from: tuple[str, ...] = ()  # node ids this replica's calls fail to (a partition)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cut_off_from", tuple(self.cut_off_from))
