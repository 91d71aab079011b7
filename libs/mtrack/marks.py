"""Rising HLC marks per token range — the reconciliation fences and low bounds of one keyspace
at one replica. Pure.

Theory of operation. A reconciliation round of a range picks a time *t*, fences every replica
of the range at *t* (from then on a write whose id's HLC is below *t* is refused for that range;
the coordinator retries with a fresh id), and, once every replica holds every id below *t*,
advances the range's low bound to *t* (below it a replica deletes its log entries). Both marks
only rise, and both must stay true while ranges split and merge, which the rounds do not see:

* *Fences* answer for a **range** (``of``): the highest mark of the pieces it intersects. A range
  split from a fenced range inherits the fence, and a merged range takes the maximum of what it
  merged — an id below the higher fence may already be collected on the side that had it.
* *Low bounds* answer for a **token** (``at``): the highest mark of the pieces that contain it.
  A piece ``(range, t)`` says every id of the range below *t* was on every replica, so that holds
  for each of its tokens whatever the range became; a merged range keeps each side's bound per
  token (the maximum over the range would drop ids of the lower side that were never
  reconciled).

``RangeMarks`` keeps the pieces as the rounds named them, each ``(range, t)``. ``raised`` adds a
piece and forgets the pieces it covers with a lower or equal mark (both answers unchanged), so
the pieces stay as many as the ranges marked at different times, never more. A mark never goes
down: raising a range to less than it has changes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from epochal.mtrack.hlc import MAX_HLC
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange, covers


@dataclass(frozen=True, slots=True)
class Mark:
    range: TokenRange
    hlc: int

    def __post_init__(self) -> None:
        if not 0 <= self.hlc <= MAX_HLC:
            raise ValueError(f"a mark is an HLC in 0..2^63-1, got {self.hlc}")


@dataclass(frozen=True, slots=True)
class RangeMarks:
    pieces: tuple[Mark, ...] = ()

    @classmethod
    def of_pieces(cls, pieces: Iterable[Mark]) -> RangeMarks:
        """The marks as stored, piece by piece, in any order."""
        marks = cls()
        for piece in sorted(pieces, key=lambda p: p.hlc):
            marks = marks.raised(piece.range, piece.hlc)
        return marks

    def of(self, token_range: TokenRange) -> int:
        """A fence's answer for ``token_range``: the highest of the pieces it intersects (0:
        none)."""
        return max((p.hlc for p in self.pieces if p.range.intersects(token_range)), default=0)

    def at(self, token: int) -> int:
        """A low bound's answer for ``token``: the highest of the pieces containing it (0:
        none)."""
        return max((p.hlc for p in self.pieces if p.range.contains(token)), default=0)

    def at_most(self, other: RangeMarks, token_range: TokenRange) -> bool:
        """Whether ``self.at(t) <= other.at(t)`` for every token ``t`` of ``token_range``."""
        return all(self.at(t) <= other.at(t) for t in _deciding_tokens(token_range, self, other))

    def lowest(self, token_range: TokenRange) -> int:
        """The lowest low bound over ``token_range``: the least ``at(t)`` of its tokens (0
        where no piece holds one)."""
        return min((self.at(t) for t in _deciding_tokens(token_range, self)), default=0)

    def raised(self, token_range: TokenRange, hlc: int) -> RangeMarks:
        """These marks with ``token_range`` marked at ``hlc`` (where it has less)."""
        if hlc <= self.of(token_range) and any(
            covers(p.range, token_range) for p in self.pieces if p.hlc >= hlc
        ):
            return self  # a piece at least as high covers it already
        kept = tuple(p for p in self.pieces if not (p.hlc <= hlc and covers(token_range, p.range)))
        return RangeMarks((*kept, Mark(token_range, hlc)))


def _deciding_tokens(token_range: TokenRange, *marks: RangeMarks) -> list[int]:
    """Tokens of ``token_range`` that decide a question about every token of it: marks are
    constant between piece ends, so the tokens just inside each piece end do."""
    ends = {token_range.left + 1, token_range.right, MIN_TOKEN + 1, MAX_TOKEN}
    for piece in (p for m in marks for p in m.pieces):
        ends |= {piece.range.left, piece.range.left + 1, piece.range.right}
        ends |= {piece.range.right + 1}
    return [t for t in ends if MIN_TOKEN < t <= MAX_TOKEN and token_range.contains(t)]


def bounded_segments(token_range: TokenRange, *marks: RangeMarks) -> list[tuple[int, int, int]]:
    """``token_range`` as non-wrapping pieces ``(left, right, bound)`` over which the highest of
    ``marks``' low bounds is one value: marks are constant between their pieces' ends, so a
    query per segment filters by bound in SQL instead of a lookup per id."""
    ends = {
        end for m in marks for piece in m.pieces for end in (piece.range.left, piece.range.right)
    }
    segments = []
    for left, right in token_range.pieces():
        cuts = sorted({left, right, *(e for e in ends if left < e < right)})
        for low, high in itertools.pairwise(cuts):
            bound = max((m.at(high) for m in marks), default=0)
            segments.append((low, high, bound))
    return segments
