"""Messages between Paxos members. Frozen, keyword-only, validated when built.

Slots start at 1; ``chosen_up_to == 0`` means nothing is known chosen. A slot value is a tuple
of opaque byte strings (a batch); the empty tuple is a no-op. Slots are stored as signed 64-bit
integers and a log never comes near ``MAX_SLOT`` (2^62): a message naming a slot beyond it, or a
chosen prefix beyond ``MAX_CHOSEN`` (2^61), is refused when it is built (the gRPC layer answers
INVALID_ARGUMENT), never stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochal.paxos.ballot import Ballot

SlotValue = tuple[bytes, ...]
NOOP: SlotValue = ()
MAX_SLOT = 1 << 62
# A chosen prefix a message names stays below this, so that a member that takes it (and then
# proposes or accepts up to a window past it) never builds a slot past MAX_SLOT.
MAX_CHOSEN = MAX_SLOT >> 1


def check_slot(name: str, slot: int, *, lowest: int = 1, highest: int = MAX_SLOT) -> None:
    """A slot number, within what storage holds."""
    if not lowest <= slot <= highest:
        raise ValueError(f"{name} must be in {lowest}..{highest}, got {slot}")


def check_prefix(name: str, slot: int) -> None:
    """A "chosen up to" mark (0: nothing chosen)."""
    check_slot(name, slot, lowest=0, highest=MAX_CHOSEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptedSlot:
    slot: int
    ballot: Ballot
    value: SlotValue

    def __post_init__(self) -> None:
        check_slot("slot", self.slot)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChosenSlot:
    slot: int
    value: SlotValue

    def __post_init__(self) -> None:
        check_slot("slot", self.slot)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    src: str
    dst: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepare(Message):
    ballot: Ballot
    from_slot: int

    def __post_init__(self) -> None:
        check_slot("from_slot", self.from_slot)


@dataclass(frozen=True, slots=True, kw_only=True)
class Promise(Message):
    ballot: Ballot
    accepted: tuple[AcceptedSlot, ...]
    chosen_up_to: int

    def __post_init__(self) -> None:
        check_prefix("chosen_up_to", self.chosen_up_to)


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

    def __post_init__(self) -> None:
        check_slot("slot", self.slot)
        check_prefix("chosen_up_to", self.chosen_up_to)


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted(Message):
    ballot: Ballot
    slot: int

    def __post_init__(self) -> None:
        check_slot("slot", self.slot)


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit(Message):
    ballot: Ballot
    chosen_up_to: int

    def __post_init__(self) -> None:
        check_prefix("chosen_up_to", self.chosen_up_to)


@dataclass(frozen=True, slots=True, kw_only=True)
class CatchUpRequest(Message):
    from_slot: int

    def __post_init__(self) -> None:
        check_slot("from_slot", self.from_slot)


@dataclass(frozen=True, slots=True, kw_only=True)
class CatchUpReply(Message):
    chosen: tuple[ChosenSlot, ...]
    chosen_up_to: int
    compacted_up_to: int

    def __post_init__(self) -> None:
        check_prefix("chosen_up_to", self.chosen_up_to)
        check_prefix("compacted_up_to", self.compacted_up_to)
