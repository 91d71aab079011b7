"""What the shell must do after feeding the core: persist, send, apply — in that order."""

from __future__ import annotations

from dataclasses import dataclass

from epochal.paxos.ballot import Ballot
from epochal.paxos.messages import AcceptedSlot, ChosenSlot, Message


@dataclass(frozen=True, slots=True, kw_only=True)
class StateTransfer:
    """The peer no longer keeps the slots this member lacks: copy its state up to ``up_to``."""

    peer: str
    up_to: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    # 1. Send at once: proposer and learner traffic, safe before anything below is durable.
    messages: tuple[Message, ...] = ()
    # 2. Make durable, in the order Readies were taken (a promise, then accepted slots).
    persist_promise: Ballot | None = None
    persist_accepted: tuple[AcceptedSlot, ...] = ()
    # 3. Send only once (2) is durable: acceptor replies count toward the commit point.
    messages_after_persist: tuple[Message, ...] = ()
    # 4. Newly chosen slots, contiguous and in order: apply them in this order.
    chosen: tuple[ChosenSlot, ...] = ()
    # Values queued here but never proposed when leadership was lost (certainly not chosen).
    dropped_values: tuple[bytes, ...] = ()
    state_transfer: StateTransfer | None = None

    @property
    def needs_persist(self) -> bool:
        return self.persist_promise is not None or bool(self.persist_accepted)

    def is_empty(self) -> bool:
        return not (
            self.messages
            or self.needs_persist
            or self.messages_after_persist
            or self.chosen
            or self.dropped_values
            or self.state_transfer
        )
