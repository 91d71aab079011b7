"""Catch-up: chosen values copied from a peer, and the hint to copy its state instead.

Theory of operation
-------------------
A member that learns of a chosen prefix beyond its own (in an Accept or a Commit, or a leader in
its promises) asks the member that reported it for the chosen values (``CatchUpRequest``), at
most every ``retransmit_interval_ms`` unless the last answer was one page of several. The peer
answers with up to ``max_catch_up_slots`` chosen values from the slot asked for. A reply's values
are taken only where they extend the chosen prefix (a leader's, only up to the prefix its
promises reported): a value held past a gap would be delivered later over whatever the group
chose there. A member that asks for slots the peer has compacted is told so and must copy the
peer's state (``Ready.state_transfer``, then ``install_state``).

A leader takes replies with its own handler (installed with the role): a reply from the member
whose reported prefix it waits for, still holding it, extends the leader's wait (``leader``,
``_tick_leader``).
"""

from __future__ import annotations

from epochal.paxos.messages import CatchUpReply, CatchUpRequest, ChosenSlot
from epochal.paxos.ready import StateTransfer
from epochal.paxos.state import MemberState, Slot


class CatchUp(MemberState):
    _catch_up_retry_ms: int  # no request before this, unless forced

    def _init_catch_up(self) -> None:
        self._catch_up_retry_ms = 0
        self._catch_up_target = 0
        self._catch_up_peer = None
        self._catch_up_deadline_ms = 0

    def _request_catch_up(self, peer: str, *, force: bool = False) -> None:
        if peer == self.node_id or (not force and self._now_ms < self._catch_up_retry_ms):
            return
        self.stats.catch_up_requests += 1
        self._catch_up_retry_ms = self._now_ms + self.settings.retransmit_interval_ms
        self._send(CatchUpRequest(src=self.node_id, dst=peer, from_slot=self._chosen_up_to + 1))

    def _on_catch_up_request(self, m: CatchUpRequest) -> None:
        if m.from_slot <= self._compacted_up_to:
            reply = CatchUpReply(
                src=self.node_id,
                dst=m.src,
                chosen=(),
                chosen_up_to=self._chosen_up_to,
                compacted_up_to=self._compacted_up_to,
            )
        else:
            last = min(self._chosen_up_to, m.from_slot + self.settings.max_catch_up_slots - 1)
            chosen = []
            for s in range(m.from_slot, last + 1):
                chosen.append(ChosenSlot(slot=s, value=self._chosen_value(s)))
            reply = CatchUpReply(
                src=self.node_id,
                dst=m.src,
                chosen=tuple(chosen),
                chosen_up_to=self._chosen_up_to,
                compacted_up_to=0,
            )
        self._send(reply)

    def _on_catch_up_reply(self, m: CatchUpReply) -> None:
        """A follower's or a candidate's handler."""
        self._take_catch_up_reply(m, leading=False)

    def _on_catch_up_reply_as_leader(self, m: CatchUpReply) -> None:
        if m.src == self._catch_up_peer and m.chosen_up_to >= self._catch_up_target:
            # The peer still holds what it reported (pages, or its state to copy, will come):
            # the leader waits on for it (_tick_leader).
            self._catch_up_deadline_ms = self._now_ms + self.settings.election_timeout_ms
        self._take_catch_up_reply(m, leading=True)

    def _take_catch_up_reply(self, m: CatchUpReply, *, leading: bool) -> None:
        if not m.chosen:
            if m.compacted_up_to > self._chosen_up_to:
                self._out.state_transfer = StateTransfer(peer=m.src, up_to=m.compacted_up_to)
            return
        # Values only where they extend the chosen prefix, delivered at once (``learner``). Held
        # past a gap, a value was delivered once the gap filled, over what the group chose
        # there, and on a leader past the next slot it proposes, which it then never proposed
        # (the CMS proposes only from an idle leader): a forged reply naming a slot ahead of the
        # log stopped a CMS leader so. A leader takes none past the prefix its promises
        # reported; it learns the slots it proposes from their votes. A real reply starts at
        # the slot asked for, and a value past a gap comes again on the page asked for next. A
        # forged reply naming exactly the next slot, as a real one would, only authenticated
        # peers keep out (epochal.paxos.ballot).
        wanted = min(m.chosen_up_to, self._catch_up_target) if leading else m.chosen_up_to
        for record in m.chosen:
            if record.slot <= self._chosen_up_to:
                continue
            if record.slot != self._chosen_up_to + 1 or (leading and record.slot > wanted):
                break
            self._log.setdefault(record.slot, Slot()).chosen_value = record.value
            self._advance_chosen()
        if self._chosen_up_to < wanted:
            # A page of an answer to our request: ask for the next one at once. Otherwise (a
            # leader's unasked value of one slot, past a gap here) ask at the usual pace, so
            # that each such value does not start a chain of requests of its own.
            paged = m.chosen[-1].slot < m.chosen_up_to
            self._request_catch_up(m.src, force=paged)
