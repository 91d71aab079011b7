"""What ``ReplicaAdmin.Status`` (and every operation's answer) says about the topology operation
this node drives: a domain value, converted to protobuf by the gRPC layer. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationStatus:
    node_id: str  # the node whose sequence it is
    epoch: int  # this node's
    kind: str  # join, leave, ... ("" when none is in progress or recorded)
    step: str  # the last step taken
    # idle, running, waiting_for_barrier, streaming, finished, aborting, aborted, cancelled,
    # failed, interrupted
    state: str
    message: str  # what it is doing or why it failed
    prepared_epoch: int
    streamed_bytes: int
    streamed_cells: int
    streamed_mutations: int
    ranges_done: int
    ranges_total: int
    eta_s: float  # -1 when unknown
    barrier_level: str  # the level the current (or last) barrier met or waits at
    reconciled_mutations: int  # log entries the partial reconciliation brought
