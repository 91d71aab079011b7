"""Reconciliation fences of one keyspace: per token range, the HLC below which a replica admits
no more writes. Pure.

Theory of operation. A reconciliation round of a range picks a time *t* and fences every replica
of the range at *t*: from then on a write whose id's HLC is below *t* is refused for that range
(the coordinator retries with a fresh id), so no id below *t* can appear after the round
collected the ids below *t*. Three rules keep that true while ranges change:

1. *A fence never goes down.* Raising a range to a lower *t* than it has changes nothing.
2. *A range split from a fenced range inherits the fence*: its ids were fenced as the parent's.
3. *A merged range takes the maximum* of the fences of what it merged: an id below the higher
   fence may already be collected on the side that had it.

``Fences`` keeps the pieces fenced so far, each ``(range, t)``, as the rounds named them. The
fence of any range — a piece, a part of one, a union of several — is the highest ``t`` of the
pieces it intersects (``of``), which is rules 2 and 3 at once, whatever the placement did in
between. ``raised`` adds a piece and forgets the pieces it covers with a lower or equal ``t``,
so the pieces stay as many as the ranges fenced at different times, never more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochal.mtrack.hlc import MAX_HLC
from epochal.tcm.tokens import TokenRange


@dataclass(frozen=True, slots=True)
class Fence:
    range: TokenRange
    hlc: int  # writes whose id's HLC is below this are refused for the range

    def __post_init__(self) -> None:
        if not 0 <= self.hlc <= MAX_HLC:
            raise ValueError(f"a fence is an HLC in 0..2^63-1, got {self.hlc}")


@dataclass(frozen=True, slots=True)
class Fences:
    pieces: tuple[Fence, ...] = ()

    @classmethod
    def of_pieces(cls, pieces: Iterable[Fence]) -> Fences:
        """The fences as stored, piece by piece, in any order."""
        fences = cls()
        for piece in sorted(pieces, key=lambda p: p.hlc):
            fences = fences.raised(piece.range, piece.hlc)
        return fences

    def of(self, token_range: TokenRange) -> int:
        """The fence of ``token_range``: the highest of the pieces it intersects (0: none)."""
        return max((p.hlc for p in self.pieces if p.range.intersects(token_range)), default=0)

    def admits(self, token_range: TokenRange, hlc: int) -> bool:
        """Whether a write whose id has ``hlc`` may be admitted to the log of ``token_range``,
        the range that holds its token now: not below the range's fence."""
        return hlc >= self.of(token_range)

    def raised(self, token_range: TokenRange, hlc: int) -> Fences:
        """These fences with ``token_range`` fenced at ``hlc`` (or at its fence, if higher)."""
        if hlc <= self.of(token_range) and any(
            covers(p.range, token_range) for p in self.pieces if p.hlc >= hlc
        ):
            return self  # a piece at least as high covers it already
        kept = tuple(p for p in self.pieces if not (p.hlc <= hlc and covers(token_range, p.range)))
        return Fences((*kept, Fence(token_range, hlc)))


def covers(outer: TokenRange, inner: TokenRange) -> bool:
    """Whether every token of ``inner`` is in ``outer``."""
    outer_pieces = sorted(outer.pieces())
    for left, right in inner.pieces():
        reached = left  # (left, reached] is covered
        for o_left, o_right in outer_pieces:
            if o_left <= reached < o_right:
                reached = o_right
        if reached < right:
            return False
    return True
