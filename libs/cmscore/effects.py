"""What the member core asks its shell to do, as values: the shell takes them after every input
(``MemberCore.take_effects``) and performs them in order.

A commit waiting at this member is a ``Waiter``: an object of the shell's (an asyncio future in
the server, a record in the simulator) that the core holds, asks only whether it is done, and
settles through a ``Settle`` effect."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from epochal.cmscore.rows import LogEntryRow
from epochal.cmscore.state_machine import CommitResult
from epochal.errors import EpochalError


class Waiter(Protocol):
    def done(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Settle:
    """Answer a waiting commit (a no-op when its caller has gone)."""

    waiter: Waiter
    outcome: CommitResult | EpochalError


@dataclass(frozen=True, slots=True)
class PeersChanged:
    """The other members' addresses changed (the CMS members did): follow them."""

    addresses: dict[str, str]


@dataclass(frozen=True, slots=True)
class Published:
    """Log entries just applied, for the members' log readers and watchers."""

    rows: tuple[LogEntryRow, ...]
    epoch: int


@dataclass(frozen=True, slots=True)
class FlushDue:
    """Applied state waits to be written (lazily): ``take_applied`` within the flush interval."""


@dataclass(frozen=True, slots=True)
class StartLinger:
    """Group commit: call ``linger_over`` after ``delay_ms``."""

    delay_ms: float


@dataclass(frozen=True, slots=True)
class CancelLinger:
    pass


@dataclass(frozen=True, slots=True)
class BeginStateTransfer:
    """The peers no longer keep the slots this member lacks: copy ``peer``'s state."""

    peer: str


@dataclass(frozen=True, slots=True)
class ReadinessChanged:
    ready: bool


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader_id: str | None
    is_leader: bool


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """This leader proposed a slot of ``batch_size`` values (a span begins), carrying the
    commits of ``entry_ids``."""

    batch_size: int
    ballot: str
    entry_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """The value this leader proposed was chosen and applied at ``slot``, or (0) abandoned:
    leadership moved on, or the slot chose another value."""

    slot: int


@dataclass(frozen=True, slots=True)
class StoppedApplying:
    """This member cannot apply the log (``reason``): it takes no further part."""

    reason: str


Effect = (
    Settle
    | PeersChanged
    | Published
    | FlushDue
    | StartLinger
    | CancelLinger
    | BeginStateTransfer
    | ReadinessChanged
    | LeaderChanged
    | RoundStarted
    | RoundEnded
    | StoppedApplying
)
