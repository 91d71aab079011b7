"""The commits waiting at a member, and how each is answered: queued at the leader, in the slot
it proposed, or forwarded to the leader. Every answer leaves as a ``Settle`` effect, and only
from what was applied here (or decided before proposing: a known id, a refusal)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from epochal.cmscore.batching import Batch, Decision, answer_to, known_answer
from epochal.cmscore.effects import Effect, Settle, Waiter
from epochal.cmscore.state_machine import CommitResult, ProposalItem, SlotResult
from epochal.errors import EpochalError, Overloaded

Lookup = Callable[[str], tuple[int, int] | None]


class Pending:
    __slots__ = ("item", "origin", "waiter")

    def __init__(self, item: ProposalItem, waiter: Waiter, origin: str | None) -> None:
        self.item = item
        self.waiter = waiter
        self.origin = origin  # the member that forwarded it, which learns its outcome itself


class Commits:
    def __init__(self, effects: list[Effect], max_pending: int) -> None:
        self._effects = effects  # the core's outbox
        self._settling: set[int] = set()  # waiters answered by an effect not yet taken
        self._max_pending = max_pending
        self.pending: deque[Pending] = deque()
        # Commits in the slot this leader proposed, by entry id: their item's digest, and every
        # caller waiting on it.
        self.in_flight: dict[str, tuple[int, list[Waiter]]] = {}
        # Commits this member forwarded to the leader, by entry id: answered by the slot that
        # carries them when this member applies it, or by the leader, whichever comes first.
        self.forwarded: dict[str, list[tuple[ProposalItem, Waiter]]] = {}

    def settle(self, waiter: Waiter, outcome: CommitResult | EpochalError) -> None:
        """One answer per waiter: none for one its caller gave up on, none for one already
        answered by an effect the shell has not taken yet."""
        if not waiter.done() and id(waiter) not in self._settling:
            self._settling.add(id(waiter))
            self._effects.append(Settle(waiter, outcome))

    def taken(self) -> None:
        """The shell took the effects: the waiters they answer are done from now on."""
        self._settling.clear()

    def queue(self, item: ProposalItem, waiter: Waiter, origin: str | None) -> None:
        if len(self.pending) >= self._max_pending:
            raise Overloaded(
                f"{len(self.pending)} commits already queued at the leader "
                f"(--max-pending-commits); retry later"
            )
        self.pending.append(Pending(item, waiter, origin))

    def forwarding(self, item: ProposalItem, waiter: Waiter) -> None:
        self.forwarded.setdefault(item.entry_id, []).append((item, waiter))

    def forward_over(self, entry_id: str, waiter: Waiter) -> None:
        waiting = self.forwarded.get(entry_id)
        if waiting is None:
            return
        waiting[:] = [w for w in waiting if w[1] is not waiter]
        if not waiting:
            del self.forwarded[entry_id]

    def outstanding(self) -> list[Waiter]:
        waiters = [p.waiter for p in self.pending]
        waiters += [w for _, waiting in self.in_flight.values() for w in waiting]
        waiters += [w for waiting in self.forwarded.values() for _, w in waiting]
        return [w for w in waiters if not w.done()]

    def expire(self) -> None:
        while self.pending and self.pending[0].waiter.done():
            self.pending.popleft()

    def live(self) -> Iterator[Pending]:
        """The queued commits in order, each taken off the queue as it is read (one whose
        caller gave up is dropped)."""
        while self.pending:
            pending = self.pending.popleft()
            if not pending.waiter.done():
                yield pending

    def fail_in_flight(self, error: Callable[[], EpochalError]) -> None:
        for _, waiters in self.in_flight.values():
            for waiter in waiters:
                self.settle(waiter, error())
        self.in_flight.clear()

    def fail_pending(self, error: Callable[[], EpochalError]) -> None:
        while self.pending:
            self.settle(self.pending.popleft().waiter, error())

    def fail_forwarded(self, error: Callable[[], EpochalError]) -> None:
        for waiting in list(self.forwarded.values()):
            for _, waiter in waiting:
                self.settle(waiter, error())

    def decided(self, batch: Batch[Pending]) -> None:
        """Perform the builder's decisions: settle those it answered, requeue the deferred ones
        in front, and mark the proposed ones in flight."""
        deferred: list[Pending] = []
        for decided in batch.decided:
            pending = decided.commit
            if decided.decision is Decision.PROPOSED:
                self.in_flight[pending.item.entry_id] = (pending.item.digest, [pending.waiter])
            elif decided.decision is Decision.JOINED:
                # The same id twice in one batch: one proposal, both callers answered by it.
                joined = self.in_flight.setdefault(pending.item.entry_id, (pending.item.digest, []))
                joined[1].append(pending.waiter)
            elif decided.decision is Decision.DEFERRED:
                deferred.append(pending)
            else:
                assert decided.answer is not None
                self.settle(pending.waiter, decided.answer)
        self.pending.extendleft(reversed(deferred))

    def answer_forwarded_early(self, batch: Batch[Pending]) -> None:
        """The planted bug BUG_ANSWER_FORWARDED_EARLY: a forwarded commit is told the epoch its
        item reaches in the proposed slot, before that slot is chosen."""
        pairs = zip(batch.items, batch.states, strict=True)
        epochs = {item.entry_id: state.epoch for item, state in pairs}
        for decided in batch.decided:
            pending = decided.commit
            if decided.decision is Decision.PROPOSED and pending.origin is not None:
                epoch = epochs[pending.item.entry_id]
                self.settle(pending.waiter, CommitResult(epoch, False, len(batch.items)))

    def answer(self, result: SlotResult, lookup: Lookup) -> None:
        """Settle the commits waiting here on each outcome's entry id: those of the very item
        with its outcome; one that carries another transformation under that id with the id's
        record (``reused``) — or, when the slot recorded nothing under it, not yet."""
        for outcome in result.outcomes:
            waiting = [(item.digest, w) for item, w in self.forwarded.get(outcome.entry_id, ())]
            in_flight = self.in_flight.pop(outcome.entry_id, None)
            if in_flight is not None:
                waiting += [(in_flight[0], waiter) for waiter in in_flight[1]]
            known = lookup(outcome.entry_id)
            for digest, waiter in waiting:
                answer = answer_to(outcome, digest, known, len(result.outcomes), result.slot)
                if answer is not None:
                    self.settle(waiter, answer)

    def answer_installed(self, lookup: Lookup) -> None:
        """Forwarded commits whose slots a state transfer skipped: answer them from the ids."""
        for entry_id, waiting in self.forwarded.items():
            known = lookup(entry_id)
            if known is not None:
                for item, waiter in waiting:
                    self.settle(waiter, known_answer(item, known))
