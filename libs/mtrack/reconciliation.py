"""Log reconciliation of one token range, planned without I/O: the reconciliation time, who holds
which ids, which deliveries make every replica hold them all, and the digests a low bound
carries. The reconciler service drives these steps against the replicas.

Theory of operation. A round of a range, whose replicas are every node of its read and write
groups (pending ones included):

1. *Deliver.* The reconciler compares each replica's summary with one replica's, the pivot's
   (``epochal.mtrack.summary``: digests, then sketches sized by the difference), and learns from
   the pairwise differences exactly who holds each id any replica lacks (``holders``): an id
   only the pivot lacks is held by every other replica but those that lack it too, an id the
   pivot holds by the pivot and every replica that does not lack it. ``deliveries`` then sends
   each missing id once to each replica lacking it, from one of its holders — the one given the
   least so far, so a round's load spreads over the replicas — batched per (source, target).
   Deliveries move no bound and are idempotent: they run for every id, above the reconciliation
   time too, so replication lag stays near one round.
2. *Choose t* (``reconciliation_time``): the lowest HLC the replicas report, minus the write
   timeout (a write in flight may still carry an id that old), minus a slack of at least the
   largest clock skew a replica accepts; never below the range's fence (fences never go down).
3. *Fence* every replica at *t* (``epochal.mtrack.marks``): after that no id below *t* appears.
4. *Collect* the summaries below *t* and deliver what is missing, as in 1.
5. *Advance the low bound* to *t* on every replica, carrying the digests of the ids in
   ``[old bound, t)`` every replica reported holding (``span_digests``; the old bound per token,
   the highest any replica holds): a replica whose own differ refuses, and the round starts
   again.

A round whose range changed — its split points or groups, by a topology step — is abandoned:
its fences stay (a fence never hurts), its bound does not move.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from epochal.mtrack.hlc import MAX_HLC, make_hlc, physical_ms_of
from epochal.mtrack.ids import MutationId
from epochal.mtrack.marks import RangeMarks
from epochal.mtrack.summary import Difference, LogDigests


def reconciliation_time(
    replica_hlcs: Iterable[int], *, write_timeout_ms: int, slack_ms: int, fence: int = 0
) -> int:
    """The time below which the round reconciles: the lowest of ``replica_hlcs`` less the write
    timeout and the slack (at the start of its millisecond), and not below ``fence``."""
    hlcs = list(replica_hlcs)
    if not hlcs:
        raise ValueError("a reconciliation time needs the HLC of at least one replica")
    if write_timeout_ms < 0 or slack_ms < 0:
        raise ValueError("the write timeout and the slack are durations: >= 0")
    physical_ms = physical_ms_of(min(hlcs)) - write_timeout_ms - slack_ms
    return max(make_hlc(max(physical_ms, 0)), fence)


def holders(
    pivot: str, replicas: Collection[str], differences: Mapping[str, Difference]
) -> dict[MutationId, frozenset[str]]:
    """Who holds each id some replica lacks, from each other replica's difference with the
    pivot's one summary (``only_a``: ids the pivot holds and that replica lacks; ``only_b``:
    the reverse). The pivot holds an id some ``only_a`` names; every other replica holds it
    unless its own ``only_a`` names it. An id only ``only_b`` sides name the pivot lacks; the
    replicas whose ``only_b`` names it hold it."""
    others = [r for r in replicas if r != pivot]
    if pivot not in replicas or set(differences) != set(others):
        raise ValueError(
            f"one difference per replica but the pivot {pivot!r} is needed: have "
            f"{sorted(differences)}, replicas {sorted(replicas)}"
        )
    pivot_holds = set().union(*(d.only_a for d in differences.values()))
    held: dict[MutationId, frozenset[str]] = {}
    for mutation_id in pivot_holds:
        held[mutation_id] = frozenset(
            [pivot, *(r for r in others if mutation_id not in differences[r].only_a)]
        )
    for replica in others:
        for mutation_id in differences[replica].only_b:
            if mutation_id not in pivot_holds:  # (an id that reached the pivot meanwhile)
                held[mutation_id] = held.get(mutation_id, frozenset()) | {replica}
    return held


@dataclass(frozen=True, slots=True)
class Delivery:
    """Send ``ids`` from ``source``'s log to ``target``."""

    source: str
    target: str
    ids: tuple[MutationId, ...]


def deliveries(
    held: Mapping[MutationId, Collection[str]],
    replicas: Collection[str],
    *,
    batch: int,
    below: int = MAX_HLC + 1,
) -> list[Delivery]:
    """Deliveries that make every replica hold every id in ``held`` (below ``below``): each id
    to each replica lacking it, from the holder given the least so far (ties by name), in
    batches of at most ``batch`` ids per (source, target), in id order."""
    if batch <= 0:
        raise ValueError(f"a delivery batch holds at least one id, got {batch}")
    given: dict[str, int] = dict.fromkeys(replicas, 0)
    plan: dict[tuple[str, str], list[MutationId]] = {}
    for mutation_id in sorted(held, key=lambda i: (i.hlc, i.key)):
        if mutation_id.hlc >= below:
            continue
        sources = sorted(held[mutation_id])
        if not sources:
            raise ValueError(f"{mutation_id} is held by no replica: nothing can deliver it")
        for target in sorted(set(replicas) - set(sources)):
            source = min(sources, key=lambda s: (given.get(s, 0), s))
            given[source] = given.get(source, 0) + 1
            plan.setdefault((source, target), []).append(mutation_id)
    return [
        Delivery(source, target, tuple(ids[start : start + batch]))
        for (source, target), ids in sorted(plan.items())
        for start in range(0, len(ids), batch)
    ]


def span_digests(
    entries: Iterable[tuple[MutationId, int]], old_bounds: RangeMarks, new_bound: int
) -> LogDigests:
    """The digests of the ids (each with its token) in ``[old bound at its token, new_bound)``:
    what a replica reports of the span a low bound advance covers, and what the advance carries
    once every replica reported the same — a replica whose own differ then refuses. The old
    bounds are per token (a merged range keeps each side's), the highest any replica holds."""
    if not 0 <= new_bound <= MAX_HLC:
        raise ValueError(f"a low bound is an HLC in 0..2^63-1, got {new_bound}")
    return LogDigests.of(
        {i for i, token in entries if old_bounds.at(token) <= i.hlc < new_bound}, low_bound=0
    )
