"""Messages between Paxos members. Frozen, keyword-only, validated when built.

Slots start at 1; ``chosen_up_to == 0`` means nothing is known chosen. A slot value is a tuple
of opaque byte strings (a batch); the empty tuple is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochal.paxos.ballot import Ballot

SlotValue = tuple[bytes, ...]
NOOP: SlotValue = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptedSlot:
    slot: int
    ballot: Ballot
    value: SlotValue

    def __post_init__(self) -> None:
        if self.slot < 1:
            raise ValueError(f"slot must be >= 1, got {self.slot}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChosenSlot:
    slot: int
    value: SlotValue


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    src: str
    dst: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepare(Message):
    ballot: Ballot
    from_slot: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Promise(Message):
    ballot: Ballot
    accepted: tuple[AcceptedSlot, ...]
    chosen_up_to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Nack(Message):
    ballot: Ballot
    promised: Ballot


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept(Message):
    ballot: Ballot
    slot: int
    value: SlotValue
    chosen_up_to: int
    # Members that want to learn this slot from the votes themselves (acceptors send their
    # vote to them as well as to the leader): those waiting to answer a value in it.
    learners: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted(Message):
    ballot: Ballot
    slot: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit(Message):
    ballot: Ballot
    chosen_up_to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CatchUpRequest(Message):
    from_slot: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CatchUpReply(Message):
    chosen: tuple[ChosenSlot, ...]
    chosen_up_to: int
    compacted_up_to: int
