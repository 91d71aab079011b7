"""What the fuzz test (``fuzz.py``) checks in the words of every answer, besides its status code.

A refusal's message — a status's details, or said in-band in a reply (a Session failure, a peer
request refused as malformed, the ``message`` of any outcome) — must:

- not be a Python exception's text (``OverflowError('Python int too large …')``, a traceback):
  that is a bug's text leaking to the caller, where the input should have been refused as
  malformed with a clear message, or the bug answered as an internal error (and logged);
- stay bounded whatever the input was: a refusal that echoes a 64 KiB name whole does not
  reach the client at all — its status's details exceed gRPC's metadata limit, and the client
  sees RESOURCE_EXHAUSTED "received metadata size exceeds hard limit" in its place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

PYTHON_TEXT = re.compile(
    r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b\s*[(:]|Traceback \(most recent call last\)"
)
METADATA_OVERFLOW = "metadata size exceeds"
# Far above what a refusal needs to say, far below an echoed 64 KiB input (and gRPC's 8 KiB
# soft limit on metadata, where the status's details travel).
MAX_MESSAGE_CHARS = 4096
MESSAGE_FIELDS = frozenset({"message", "malformed"})  # the in-band refusals' words


def problems(
    code: grpc.StatusCode, details: str, response: Descriptor, replies: list[bytes]
) -> list[tuple[str, str]]:
    """What is wrong with the words of one answer (its status and its reply frames): (kind,
    what was seen) pairs, the kind one of "metadata limit", "Python text", "unbounded"."""
    found = []
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and METADATA_OVERFLOW in details:
        found.append(
            ("metadata limit", f"the refusal's status exceeded gRPC's metadata limit: {details!r}")
        )
    texts = [("status", details), *(("in-band", t) for t in in_band_messages(response, replies))]
    for where, text in texts:
        if PYTHON_TEXT.search(text):
            found.append(("Python text", f"the {where} message is a bug's: {text[:300]!r}"))
        if len(text) > MAX_MESSAGE_CHARS:
            found.append(
                (
                    "unbounded",
                    f"the {where} message is {len(text)} characters (it echoes the input "
                    f"unbounded): {text[:200]!r}…",
                )
            )
    return found


def in_band_messages(response: Descriptor, replies: list[bytes]) -> list[str]:
    """The refusal messages carried in ``replies`` (frames of ``response``), at any depth."""
    message_class = message_factory.GetMessageClass(response)
    found: list[str] = []
    for frame in replies:
        try:
            found.extend(_messages(message_class.FromString(frame)))
        except DecodeError:
            continue
    return found


def _messages(message: Message, depth: int = 0) -> Iterator[str]:
    for fd, value in message.ListFields():
        if fd.type == FieldDescriptor.TYPE_STRING and fd.name in MESSAGE_FIELDS:
            yield value
        elif fd.type == FieldDescriptor.TYPE_MESSAGE and depth < 4 and _carries(fd.message_type):
            for element in value if fd.is_repeated else (value,):
                yield from _messages(element, depth + 1)


_CARRIES: dict[str, bool] = {}


def _carries(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether messages of ``descriptor`` can hold a refusal message (so a Read's rows or a
    Watch's entries are not walked)."""
    name = descriptor.full_name
    if name not in _CARRIES:
        if name in seen:
            return False
        _CARRIES[name] = any(
            (f.type == FieldDescriptor.TYPE_STRING and f.name in MESSAGE_FIELDS)
            or (f.type == FieldDescriptor.TYPE_MESSAGE and _carries(f.message_type, seen | {name}))
            for f in descriptor.fields
        )
    return _CARRIES[name]
