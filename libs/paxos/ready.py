"""What the shell must do after feeding the core: send, persist, send, apply — in that order,
then ``advance``.

Each field says when its part is due. The shell takes a Ready (``PaxosNode.take_ready``),
performs it, and acknowledges it with ``PaxosNode.advance(ready)``, Readies in the order taken.
It may take the next Ready before the last one's write completes (writes are made durable in
the order the Readies were taken, so one transaction may carry several), but a Ready it never
advances fails loudly: see "The shell's side" in ``node``.
"""

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
    # 2. Make durable, after the writes of every Ready taken before (a promise, then accepted
    #    slots).
    persist_promise: Ballot | None = None
    persist_accepted: tuple[AcceptedSlot, ...] = ()
    # 3. Send only once (2) is durable, and the writes of every Ready taken before: acceptor
    #    replies count toward the commit point (a Ready with none of its own may still carry a
    #    reply that an earlier write backs, such as a repeated Promise).
    messages_after_persist: tuple[Message, ...] = ()
    # 4. Newly chosen slots, contiguous and in order, following the last Ready's: apply them in
    #    this order, telling the core each one with ``applied`` (it may wait for (3)).
    chosen: tuple[ChosenSlot, ...] = ()
    # Values queued here but never proposed when leadership was lost (certainly not chosen).
    dropped_values: tuple[bytes, ...] = ()
    # Start copying the peer's state (unless a copy is already running); it ends with
    # ``install_state``, ``applied`` and ``durable``, whenever it completes, or is dropped.
    state_transfer: StateTransfer | None = None
    # 5. Once all of the above is done: ``advance(ready)``.

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

    def obligations(self) -> str:
        """What this Ready asks of the shell after sending ``messages``, in words."""
        parts = []
        if self.needs_persist:
            promise = f"promise {self.persist_promise}, " if self.persist_promise else ""
            parts.append(f"make {promise}{len(self.persist_accepted)} accepted slots durable")
        if self.messages_after_persist:
            parts.append(f"then send {len(self.messages_after_persist)} acceptor replies")
        if self.chosen:
            parts.append(f"apply slots {self.chosen[0].slot}..{self.chosen[-1].slot}")
        if self.state_transfer is not None:
            parts.append(f"copy state from {self.state_transfer.peer}")
        return "; ".join(parts) or "nothing after sending its messages"
