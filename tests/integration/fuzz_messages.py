"""Inputs for the gRPC fuzz test: every method of every service the servers run, and for each
messages generated from its descriptor, realistic messages mutated field by field, raw garbage
frames, and streams abandoned or cancelled half way.

Generated values come from pools of boundary values (0, -1, the largest signed and unsigned
32- and 64-bit numbers, 2^63, empty and huge strings, NUL bytes, non-ASCII text) mixed with
plausible ones (the names of the fuzz keyspace and tables, node and member ids, epochs near
the current one), so that a message gets past the first checks often enough to reach storage,
the HLC and the Paxos ballots: the places where a bad number once crashed a process.

A boundary mutation changes one scalar of a realistic message, at any depth (an element of a
repeated field of a nested message too: a cell of an Exchange apply's cell repair), to a value
past what the server keeps: an unsigned 64-bit number at or above 2^63 (SQLite's INTEGER is
signed), the most negative signed one, the largest 32-bit one; or a string to 64 KiB (ASCII, or
non-ASCII, which gRPC percent-encodes to three bytes a byte in a status), which a refusal must not
echo whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from epochal.wire.v1 import cms_pb2, replica_pb2

CMS_SERVICES = ("epochal.v1.CMS", "epochal.v1.CMSPeer")
BOTH = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection")
INT32 = [0, 1, -1, 2**31 - 1, -(2**31), 7]
INT64 = [0, 1, -1, 2**63 - 1, -(2**63), 2**62, 2**53 + 1, -(2**62)]
UINT32 = [0, 1, 2**32 - 1, 2**31, 3, 1000]
UINT64 = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 2**62, 2**32, 5, 1_000_000]
DOUBLES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e308, -1.5]
TEXTS = ["", "a", "\x00", "é☃\U0001f600", "x" * 70_000, "  ", "../../etc", "1", "1.0.0"]
NAMES = ["fuzz", "ft", "tracked", "plain", "missing", "node-1", "node-2", "node-99", "cms1"]
LONG_TEXTS = ["k" * 65_536, "\u00e9" * 32_768]  # 64 KiB as UTF-8
EXTREMES = {  # per integer kind: past what storage and the cores keep
    "u64": [2**63, 2**64 - 1, 2**63 + 1],
    "s64": [-(2**63), -1, 2**63 - 1],
    "u32": [2**32 - 1, 2**31],
    "s32": [-(2**31), -1, 2**31 - 1],
}
BOUNDARY_SHARE = 0.5  # of the mutations of a realistic message
LONG_TEXT_SHARE = 0.04  # of the generated strings


@dataclass(frozen=True, slots=True)
class Method:
    service: str
    name: str
    request: Descriptor
    response: Descriptor
    client_streaming: bool
    server_streaming: bool

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"

    @property
    def targets(self) -> str:
        """Which servers serve it: "cms", "replica" or "both"."""
        if self.service in BOTH:
            return "both"
        return "cms" if self.service in CMS_SERVICES else "replica"


def methods() -> list[Method]:
    """Every RPC method of every service a CMS member or a replica serves."""
    services: list[ServiceDescriptor] = [
        *cms_pb2.DESCRIPTOR.services_by_name.values(),
        *replica_pb2.DESCRIPTOR.services_by_name.values(),
        health_pb2.DESCRIPTOR.services_by_name["Health"],
        reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
    ]
    return [
        Method(
            service.full_name,
            method.name,
            method.input_type,
            method.output_type,
            method.client_streaming,
            method.server_streaming,
        )
        for service in services
        for method in service.methods
    ]


@dataclass(frozen=True, slots=True)
class Input:
    """What one fuzz call sends: frames (serialized requests, or raw garbage) and how the call
    ends — half-closed after the frames, or cancelled after ``cancel_after`` of them."""

    method: Method
    kind: str  # generated | mutated | seed | garbage | cancelled | abandoned
    frames: tuple[bytes, ...]
    cancel_after: int | None = None
    tag: str = ""  # a value written by this input, looked for in the data afterwards
    target: int = 0  # which server of the kind that serves the method (modulo their number)


PARTITIONS = 16  # the partitions of fuzz.ft that seeds write to (and the oracle reads)


@dataclass
class Context:
    """What the generator knows of the running cluster."""

    epoch: int = 1
    node_ids: list[str] = field(default_factory=lambda: ["node-1"])
    member_ids: list[str] = field(default_factory=lambda: ["cms1"])
    table_ids: list[str] = field(default_factory=list)


class Generator:
    def __init__(
        self,
        rng: random.Random,
        context: Context,
        seeds: dict[str, list[Callable[[str], Message]]],
    ) -> None:
        self.rng = rng
        self.context = context
        self.seeds = seeds  # method path -> builders of realistic requests (given a tag)
        self._boundary_counts: Counter[tuple[str, str]] = Counter()  # (method, field path)

    # ------------------------------------------------------------------ inputs

    def input_for(self, method: Method, number: int) -> Input:
        made = self._input_for(method, number)
        return dataclasses.replace(made, target=self.rng.randrange(1 << 16))

    def _input_for(self, method: Method, number: int) -> Input:
        rng = self.rng
        tag = f"fz{number}"
        roll = rng.random()
        builders = self.seeds.get(method.path, [])
        if roll < 0.08:
            return Input(method, "garbage", self._garbage_frames(method), tag=tag)
        if method.client_streaming and roll < 0.16:
            frames = tuple(self._frame(method, builders, tag) for _ in range(rng.randint(1, 3)))
            kind = "abandoned" if rng.random() < 0.3 else "cancelled"
            cut = 0 if kind == "abandoned" else rng.randint(0, len(frames))
            return Input(method, kind, frames, cancel_after=cut, tag=tag)
        count = rng.randint(1, 3) if method.client_streaming else 1
        frames = tuple(self._frame(method, builders, tag) for _ in range(count))
        kind = "mutated" if builders and roll < 0.8 else "generated"
        return Input(method, kind, frames, tag=tag)

    def _frame(
        self, method: Method, builders: Sequence[Callable[[str], Message]], tag: str
    ) -> bytes:
        rng = self.rng
        if builders and rng.random() < 0.75:
            message = rng.choice(builders)(tag)
            if rng.random() < 0.85:
                self.mutate(message, method.path)
        else:
            message = self.message(method.request)
        return message.SerializeToString()

    def _garbage_frames(self, method: Method) -> tuple[bytes, ...]:
        rng = self.rng
        choices = [
            rng.randbytes(rng.randint(1, 64)),
            b"\xff" * rng.randint(1, 32),
            b"\x0a\xff\xff\xff\xff\x0f",  # a length far past the end
            b"\x08",  # a tag without its value
            bytes([rng.randrange(256)]) + b"\x00" * rng.randint(0, 8),
        ]
        frames = [rng.choice(choices)]
        if method.client_streaming and rng.random() < 0.5:
            frames.insert(0, self.message(method.request).SerializeToString())
        return tuple(frames)

    # ------------------------------------------------------------------ messages

    def message(self, descriptor: Descriptor, depth: int = 0) -> Message:
        message = message_factory.GetMessageClass(descriptor)()
        for oneof in descriptor.oneofs:
            if oneof.fields and self.rng.random() < 0.8:
                self._set(message, self.rng.choice(oneof.fields), depth)
        for field_descriptor in descriptor.fields:
            if field_descriptor.containing_oneof is None and self.rng.random() < 0.6:
                self._set(message, field_descriptor, depth)
        return message

    def _set(self, message: Message, fd: FieldDescriptor, depth: int) -> None:
        if fd.is_repeated:
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                return  # maps: left empty
            target = getattr(message, fd.name)
            for _ in range(self.rng.choice([0, 1, 1, 2, 3])):
                if fd.type == FieldDescriptor.TYPE_MESSAGE:
                    if depth < 4:
                        target.add().CopyFrom(self.message(fd.message_type, depth + 1))
                else:
                    _append(target, self.value(fd))
            return
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if depth < 4:
                getattr(message, fd.name).CopyFrom(self.message(fd.message_type, depth + 1))
            return
        _assign(message, fd, self.value(fd))

    def value(self, fd: FieldDescriptor) -> Any:
        rng = self.rng
        kind = fd.type
        name = fd.name
        if kind == FieldDescriptor.TYPE_BOOL:
            return rng.random() < 0.5
        if kind == FieldDescriptor.TYPE_ENUM:
            numbers = [v.number for v in fd.enum_type.values]
            return rng.choice([*numbers, *numbers, -1, 99])
        if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return rng.choice(DOUBLES)
        if kind == FieldDescriptor.TYPE_STRING:
            return self._text(name)
        if kind == FieldDescriptor.TYPE_BYTES:
            return self._bytes(name)
        if "epoch" in name:
            current = self.context.epoch
            pool = [0, 1, current, current + 1, current + 1000, 2**63, 2**64 - 1]
            return _fit(fd, rng.choice(pool))
        if name == "round":
            # Past 2^62 (refused), but not 2^62 itself: a forged round at the very end of the
            # range is accepted and leaves no higher one to elect with, which only
            # authenticated peers prevent (epochal.paxos.ballot).
            return _fit(fd, rng.choice([0, 1, 2, 3, 1 << 40, (1 << 62) + 1, 2**63, 2**64 - 1]))
        return _fit(fd, rng.choice(_pool(fd)))

    def _text(self, name: str) -> str:
        rng = self.rng
        context = self.context
        plausible: list[str] = []
        if name in ("keyspace",):
            plausible = ["fuzz", "plain", "missing"]
        elif name in ("table", "name"):
            plausible = ["ft", "pt", "missing"]
        elif name in ("table_id",):
            plausible = context.table_ids or ["t-1"]
        elif name in ("node_id", "replaced", "receiver", "sequence_node", "node"):
            plausible = context.node_ids
        elif name in ("src", "dst", "member_id", "leader"):
            plausible = context.member_ids
        elif name in ("entry_id",):
            plausible = [uuid.uuid4().hex]
        elif name in ("column",):
            plausible = ["v", "n", "p", "c", "missing"]
        elif name in ("version", "software_version"):
            plausible = ["1.0.0", "1", "0.0.1", "99999999999.0.0"]
        elif name in ("address",):
            plausible = ["127.0.0.1:1", "nowhere:0", "127.0.0.1:99999"]
        elif name in ("holder",):
            plausible = ["reconciler-1", "reconciler-2", ""]  # "": a release
        if plausible and rng.random() < 0.7:
            return rng.choice(plausible)
        if rng.random() < LONG_TEXT_SHARE:
            return rng.choice(LONG_TEXTS)
        return rng.choice(
            [*TEXTS, *NAMES, "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(8))]
        )

    def _bytes(self, name: str) -> bytes:
        rng = self.rng
        return rng.choice(
            [
                b"",
                rng.randbytes(rng.randint(1, 40)),
                b"\x00" * 16,
                b"\x01" + rng.randbytes(8),
                b"\xff" * rng.randint(1, 24),
                rng.randbytes(16),
            ]
        )

    # ------------------------------------------------------------------ mutation

    def mutate(self, message: Message, method: str = "") -> None:
        """Change 1 to 3 fields somewhere in ``message``: a boundary value, a clear, a copy;
        or, a share of the time, one scalar to a value past the server's range (``boundary``)."""
        if self.rng.random() < BOUNDARY_SHARE:
            self.boundary(message, method)
            return
        for _ in range(self.rng.randint(1, 3)):
            places = _places(message)
            if not places:
                return
            parent, fd, _ = self.rng.choice(places)
            self._mutate_field(parent, fd)

    def boundary(self, message: Message, method: str = "") -> None:
        """One integer (or, less often, string) field anywhere in ``message`` — one element of
        a repeated one — set past the server's range (see the module docstring). The field is
        the one of the message's fields boundary-mutated least often so far in ``method``'s
        messages, so that a run reaches every field of every realistic request."""
        places = [x for x in _places(message) if x[1].type in _EXTREME_KINDS]
        numbers = [x for x in places if x[1].type != FieldDescriptor.TYPE_STRING]
        if numbers and self.rng.random() < 0.75:
            places = numbers
        if not places:
            return
        counts = self._boundary_counts
        fewest = min(counts[method, path] for _, _, path in places)
        parent, fd, path = self.rng.choice([x for x in places if counts[method, x[2]] == fewest])
        counts[method, path] += 1
        kind = _EXTREME_KINDS[fd.type]
        value = self.rng.choice(LONG_TEXTS if kind == "text" else EXTREMES[kind])
        if not fd.is_repeated:
            _assign(parent, fd, value)
            return
        target = getattr(parent, fd.name)
        if len(target):
            with contextlib.suppress(TypeError, ValueError):
                target[self.rng.randrange(len(target))] = value
        else:
            _append(target, value)

    def _mutate_field(self, parent: Message, fd: FieldDescriptor) -> None:
        rng = self.rng
        roll = rng.random()
        if fd.is_repeated:
            target = getattr(parent, fd.name)
            if roll < 0.25:
                del target[:]
            elif len(target) and roll < 0.5:
                if fd.type == FieldDescriptor.TYPE_MESSAGE:
                    target.add().CopyFrom(target[rng.randrange(len(target))])
                else:
                    _append(target, target[rng.randrange(len(target))])
            elif fd.type != FieldDescriptor.TYPE_MESSAGE and len(target):
                target[rng.randrange(len(target))] = self.value(fd)
            else:
                self._set(parent, fd, 2)
            return
        if roll < 0.2:
            parent.ClearField(fd.name)
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(parent, fd.name).CopyFrom(self.message(fd.message_type, 2))
        else:
            _assign(parent, fd, self.value(fd))


def _places(
    message: Message, depth: int = 0, prefix: str = ""
) -> list[tuple[Message, FieldDescriptor, str]]:
    """(containing message, field, its path of field names) for every field that may be
    changed, set or not."""
    found = []
    for fd in message.DESCRIPTOR.fields:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            continue
        path = f"{prefix}{fd.name}"
        found.append((message, fd, path))
        if depth < 5 and fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.is_repeated:
                for element in getattr(message, fd.name):
                    found.extend(_places(element, depth + 1, f"{path}."))
            elif message.HasField(fd.name):
                found.extend(_places(getattr(message, fd.name), depth + 1, f"{path}."))
    return found


_INT_POOLS = {
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_INT64: INT64,
    FieldDescriptor.TYPE_SINT64: INT64,
    FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT32: UINT32,
    FieldDescriptor.TYPE_FIXED32: UINT32,
    FieldDescriptor.TYPE_UINT64: UINT64,
    FieldDescriptor.TYPE_FIXED64: UINT64,
}


_EXTREME_KINDS = {
    FieldDescriptor.TYPE_STRING: "text",
    **dict.fromkeys(
        (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64),
        "u64",
    ),
    **dict.fromkeys(
        (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64),
        "s64",
    ),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32), "u32"),
    **dict.fromkeys(
        (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32),
        "s32",
    ),
}


def _pool(fd: FieldDescriptor) -> list[int]:
    return _INT_POOLS.get(fd.type, INT32)


def _fit(fd: FieldDescriptor, value: int) -> int:
    """``value`` wrapped into the field's range (so 2^63 reaches an int64 field as -2^63)."""
    bits = 32 if fd.type in _BITS_32 else 64
    if fd.type in _UNSIGNED:
        return value % (1 << bits)
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


_BITS_32 = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_FIXED32,
}
_UNSIGNED = {
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED64,
}


def _assign(message: Message, fd: FieldDescriptor, value: Any) -> None:
    if fd.type in _INT_POOLS:
        value = _fit(fd, value)
    with contextlib.suppress(TypeError, ValueError):  # e.g. an enum number it refuses
        setattr(message, fd.name, value)


def _append(target: Any, value: Any) -> None:
    with contextlib.suppress(TypeError, ValueError):
        target.append(value)
