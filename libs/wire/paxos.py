"""Paxos core messages <-> epochal.v1 protobuf (the only place paxos_pb2 is touched)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from epochal.paxos import (
    Accept,
    Accepted,
    AcceptedSlot,
    Ballot,
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
from epochal.wire.v1 import paxos_pb2 as pb


def ballot_to_proto(ballot: Ballot) -> pb.Ballot:
    return pb.Ballot(round=ballot.round, node_id=ballot.node_id)


def ballot_from_proto(message: pb.Ballot) -> Ballot:
    """Raises ValueError for a round past what storage holds (``MAX_ROUND``)."""
    return Ballot(message.round, message.node_id)


def _accepted_to_proto(record: AcceptedSlot) -> pb.AcceptedSlot:
    return pb.AcceptedSlot(
        slot=record.slot,
        ballot=ballot_to_proto(record.ballot),
        value=pb.SlotValue(values=record.value),
    )


def _accepted_from_proto(message: pb.AcceptedSlot) -> AcceptedSlot:
    return AcceptedSlot(
        slot=message.slot,
        ballot=ballot_from_proto(message.ballot),
        value=tuple(message.value.values),
    )


def _to_proto_body(message: Message) -> tuple[str, object]:
    match message:
        case Prepare():
            return "prepare", pb.Prepare(
                ballot=ballot_to_proto(message.ballot), from_slot=message.from_slot
            )
        case Promise():
            return "promise", pb.Promise(
                ballot=ballot_to_proto(message.ballot),
                accepted=[_accepted_to_proto(a) for a in message.accepted],
                chosen_up_to=message.chosen_up_to,
            )
        case Nack():
            return "nack", pb.Nack(
                ballot=ballot_to_proto(message.ballot), promised=ballot_to_proto(message.promised)
            )
        case Accept():
            return "accept", pb.Accept(
                ballot=ballot_to_proto(message.ballot),
                slot=message.slot,
                value=pb.SlotValue(values=message.value),
                chosen_up_to=message.chosen_up_to,
                learners=message.learners,
            )
        case Accepted():
            return "accepted", pb.Accepted(
                ballot=ballot_to_proto(message.ballot), slot=message.slot
            )
        case Commit():
            return "commit", pb.Commit(
                ballot=ballot_to_proto(message.ballot), chosen_up_to=message.chosen_up_to
            )
        case CatchUpRequest():
            return "catch_up_request", pb.CatchUpRequest(from_slot=message.from_slot)
        case CatchUpReply():
            return "catch_up_reply", pb.CatchUpReply(
                chosen=[
                    pb.ChosenSlot(slot=c.slot, value=pb.SlotValue(values=c.value))
                    for c in message.chosen
                ],
                chosen_up_to=message.chosen_up_to,
                compacted_up_to=message.compacted_up_to,
            )
    raise TypeError(f"not a Paxos message: {type(message).__name__}")


def message_to_proto(message: Message) -> pb.PaxosMessage:
    field, body = _to_proto_body(message)
    return pb.PaxosMessage(src=message.src, dst=message.dst, **{field: body})


def _prepare(src: str, dst: str, m: pb.Prepare) -> Message:
    return Prepare(src=src, dst=dst, ballot=ballot_from_proto(m.ballot), from_slot=m.from_slot)


def _promise(src: str, dst: str, m: pb.Promise) -> Message:
    return Promise(
        src=src,
        dst=dst,
        ballot=ballot_from_proto(m.ballot),
        accepted=tuple(_accepted_from_proto(a) for a in m.accepted),
        chosen_up_to=m.chosen_up_to,
    )


def _nack(src: str, dst: str, m: pb.Nack) -> Message:
    return Nack(
        src=src, dst=dst, ballot=ballot_from_proto(m.ballot), promised=ballot_from_proto(m.promised)
    )


def _accept(src: str, dst: str, m: pb.Accept) -> Message:
    return Accept(
        src=src,
        dst=dst,
        ballot=ballot_from_proto(m.ballot),
        slot=m.slot,
        value=tuple(m.value.values),
        chosen_up_to=m.chosen_up_to,
        learners=tuple(m.learners),
    )


def _accepted(src: str, dst: str, m: pb.Accepted) -> Message:
    return Accepted(src=src, dst=dst, ballot=ballot_from_proto(m.ballot), slot=m.slot)


def _commit(src: str, dst: str, m: pb.Commit) -> Message:
    return Commit(src=src, dst=dst, ballot=ballot_from_proto(m.ballot), chosen_up_to=m.chosen_up_to)


def _catch_up_request(src: str, dst: str, m: pb.CatchUpRequest) -> Message:
    return CatchUpRequest(src=src, dst=dst, from_slot=m.from_slot)


def _catch_up_reply(src: str, dst: str, m: pb.CatchUpReply) -> Message:
    return CatchUpReply(
        src=src,
        dst=dst,
        chosen=tuple(ChosenSlot(slot=c.slot, value=tuple(c.value.values)) for c in m.chosen),
        chosen_up_to=m.chosen_up_to,
        compacted_up_to=m.compacted_up_to,
    )


_FROM_PROTO: dict[str, Callable[[str, str, object], Message]] = {
    "prepare": _prepare,  # type: ignore[dict-item]
    "promise": _promise,  # type: ignore[dict-item]
    "nack": _nack,  # type: ignore[dict-item]
    "accept": _accept,  # type: ignore[dict-item]
    "accepted": _accepted,  # type: ignore[dict-item]
    "commit": _commit,  # type: ignore[dict-item]
    "catch_up_request": _catch_up_request,  # type: ignore[dict-item]
    "catch_up_reply": _catch_up_reply,  # type: ignore[dict-item]
}


def message_from_proto(message: pb.PaxosMessage) -> Message:
    """Raises ValueError for a message with no body or invalid fields."""
    kind = message.WhichOneof("body")
    if kind is None:
        raise ValueError("Paxos message has no body")
    return _FROM_PROTO[kind](message.src, message.dst, getattr(message, kind))


def messages_to_proto(messages: Iterable[Message]) -> list[pb.PaxosMessage]:
    return [message_to_proto(m) for m in messages]


def encode_slot_value(value: SlotValue) -> bytes:
    """How an accepted slot's value is stored by an acceptor."""
    return pb.SlotValue(values=value).SerializeToString()


def decode_slot_value(data: bytes) -> SlotValue:
    return tuple(pb.SlotValue.FromString(data).values)
