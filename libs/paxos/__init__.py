"""Multi-Paxos replicated log with no I/O (see ``node`` for the theory of operation, and each
part's module for its own: ``acceptor``, ``learner``, ``catch_up``, ``leader``, ``roles``)."""

from epochal.paxos.ballot import ZERO_BALLOT, Ballot
from epochal.paxos.errors import NotLeader, Overloaded, ReadyProtocolError
from epochal.paxos.membership import Configuration, Membership
from epochal.paxos.messages import (
    NOOP,
    Accept,
    Accepted,
    AcceptedSlot,
    CatchUpReply,
    CatchUpRequest,
    ChosenSlot,
    Commit,
    Message,
    Nack,
    Prepare,
    Promise,
    SlotValue,
)
from epochal.paxos.node import NodeStatus, PaxosNode
from epochal.paxos.ready import Ready, StateTransfer
from epochal.paxos.roles import Role
from epochal.paxos.settings import (
    BUG_REPLY_BEFORE_DURABLE,
    BUG_SKIP_REPROPOSAL,
    KNOWN_BUGS,
    PaxosSettings,
)
from epochal.paxos.state import Stats

__all__ = [
    "BUG_REPLY_BEFORE_DURABLE",
    "BUG_SKIP_REPROPOSAL",
    "KNOWN_BUGS",
    "NOOP",
    "ZERO_BALLOT",
    "Accept",
    "Accepted",
    "AcceptedSlot",
    "Ballot",
    "CatchUpReply",
    "CatchUpRequest",
    "ChosenSlot",
    "Commit",
    "Configuration",
    "Membership",
    "Message",
    "Nack",
    "NodeStatus",
    "NotLeader",
    "Overloaded",
    "PaxosNode",
    "PaxosSettings",
    "Prepare",
    "Promise",
    "Ready",
    "ReadyProtocolError",
    "Role",
    "SlotValue",
    "StateTransfer",
    "Stats",
]
