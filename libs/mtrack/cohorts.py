"""Cohorts: the replicas of a range that reconcile among themselves while others are cut off
(seed 002, "Cohort reconciliations"). Pure.

Theory of operation
-------------------
A full reconciliation needs every replica of a range. When some stay unreachable, the others —
the *members* — still reconcile among themselves: deliveries make them hold the same ids, and a
*fold* to a time *t* then marks the ids of ``[low bound, t)`` they all hold as reconciled by the
cohort and deletes their log entries (their data stays). The low bound does not move: a missing
replica never took part.

* **Identity.** A cohort is named by ``cohort_id`` of its keyspace, range, members and ``low``,
  the lowest full low bound of the range when it formed. Folds by the same members under no
  newer full reconciliation extend one cohort (its ``high`` rises); another set of members, or
  the same set after a full reconciliation moved the bound, is another cohort.
* **What holding one means.** A replica that holds ``(id, high)`` holds the data of every
  mutation the cohort folded below ``high`` — a member because it stored them, a replica that
  returned because the cohort's data was delivered to it. Its log no longer lists those ids, so
  a summary alone cannot show what it holds: summaries name the cohorts held (``CohortMark``),
  and a replica lacking a cohort another replica names (``lacking``) must receive it before its
  data answers for the range.
* **Delivery.** Folded ids have no log entries to send one by one; a member's fold records the
  partitions those mutations wrote, and the cohort's data goes as those partitions' cells, whole
  (a mutation writes one partition: none is torn; newer cells there only add). Only a member that
  folded as far as it is asked sends a cohort (``folded``): only its folds recorded it.
* **Finished.** Once some replica's low bound over the cohort's range reaches ``high``, every
  replica held the cohort's data when that bound advanced: the cohort is finished — no longer
  needed, delivered or named, whatever replicas still record it.
* **End.** A full reconciliation advances the low bound only when every replica holds the same
  cohorts; a replica forgets a cohort once its low bound over the cohort's range reaches
  ``high`` (everything it covered is then below the bound, on every replica).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from epochal.mtrack.hlc import MAX_HLC
from epochal.mtrack.marks import RangeMarks
from epochal.tcm.tokens import TokenRange

MAX_MEMBERS = 64


@dataclass(frozen=True, slots=True, order=True)
class CohortMark:
    """That a replica holds cohort ``id`` up to ``high``."""

    id: int
    high: int

    def __post_init__(self) -> None:
        if not 0 < self.id <= MAX_HLC:
            raise ValueError(f"a cohort id is in 1..2^63-1, got {self.id}")
        if not 0 <= self.high <= MAX_HLC:
            raise ValueError(f"a cohort's high is an HLC in 0..2^63-1, got {self.high}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cohort:
    """A cohort of one range as a replica records it."""

    id: int
    keyspace: str
    range: TokenRange
    members: tuple[str, ...]  # sorted node ids
    low: int  # the range's lowest full low bound when it formed
    high: int  # its members folded the ids of [low, high) they all held
    folded: int = 0  # as far as this replica's own folds went (a member sends up to here)
    mutations: int = 0  # log entries folded here, and their bytes (held apart, not sent by id)
    bytes: int = 0
    formed_unix_ms: int = 0

    def __post_init__(self) -> None:
        CohortMark(self.id, self.high)  # checks both
        for name in ("folded", "mutations", "bytes", "formed_unix_ms"):
            if not 0 <= getattr(self, name) <= MAX_HLC:
                raise ValueError(f"a cohort's {name} is in 0..2^63-1, got {getattr(self, name)}")
        if list(self.members) != sorted(set(self.members)) or not len(self.members) >= 2:
            raise ValueError(f"a cohort has 2 or more distinct members, sorted: {self.members}")
        if len(self.members) > MAX_MEMBERS:
            raise ValueError(f"a cohort has at most {MAX_MEMBERS} members")
        if not 0 <= self.low <= self.high:
            raise ValueError(f"a cohort's span is low <= high, got [{self.low}, {self.high})")

    @property
    def mark(self) -> CohortMark:
        return CohortMark(self.id, self.high)


def cohort_id(keyspace: str, token_range: TokenRange, members: Iterable[str], low: int) -> int:
    """The id of the cohort ``members`` form in ``token_range`` from the full low bound ``low``:
    the same for every fold of that set from that bound, another for another set or bound."""
    names = sorted(set(members))
    if len(names) < 2:
        raise ValueError(f"a cohort has at least 2 members, got {names}")
    text = "\x00".join([keyspace, str(token_range.left), str(token_range.right), str(low), *names])
    value = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    return (value & MAX_HLC) or 1


def needed(holdings: Mapping[str, Iterable[CohortMark]]) -> dict[int, int]:
    """Per cohort any of ``holdings`` names, the highest ``high`` named: what a replica must
    hold to answer for everything those replicas hold."""
    found: dict[int, int] = {}
    for marks in holdings.values():
        for mark in marks:
            found[mark.id] = max(found.get(mark.id, 0), mark.high)
    return found


def finished(cohort: Cohort, bounds: RangeMarks) -> bool:
    """Whether ``bounds`` (the highest low bounds any replica holds) passed ``cohort``."""
    return bounds.lowest(cohort.range) >= cohort.high


def lacking(own: Iterable[CohortMark], wanted: Mapping[int, int]) -> dict[int, int]:
    """The cohorts of ``wanted`` (id -> high) that ``own`` does not hold as high."""
    held = {mark.id: mark.high for mark in own}
    return {i: high for i, high in wanted.items() if held.get(i, -1) < high}


def reach_groups(
    answered: Iterable[str], unreachable: Mapping[str, Iterable[str]]
) -> list[tuple[str, ...]]:
    """The replicas that answered, grouped by who reaches whom (``unreachable``: per replica,
    the peers its calls could not reach): in name order, each joins the first group every member
    of which it reaches both ways, else starts one — so a group's members all reach each other
    (deliveries between any two work); in a clean partition the groups are its sides. Largest
    first (ties by name)."""
    cut = {node: set(peers) for node, peers in unreachable.items()}
    groups: list[list[str]] = []
    for node in sorted(set(answered)):
        for group in groups:
            if all(m not in cut.get(node, ()) and node not in cut.get(m, ()) for m in group):
                group.append(node)
                break
        else:
            groups.append([node])
    return sorted((tuple(g) for g in groups), key=lambda g: (-len(g), g))
