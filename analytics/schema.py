"""The explicit schema of a span file's line: an OTLP ``TracesData`` in the OTLP JSON encoding,
as the OpenTelemetry file exporter writes it (one object per line).

The encoding keeps 64-bit integers as strings (``startTimeUnixNano``, ``intValue``) and ids as
hex: both are read as strings here and cast by the reader. Nothing is inferred: a field this
schema does not name is not read, a value of another type reads as null. ``arrayValue`` keeps its
elements' scalar fields (the project writes lists of strings and numbers, never nested lists or
maps); ``kvlistValue`` and ``bytesValue`` are not read.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT = "_corrupt_record"  # a line that is not JSON (a truncated last line) lands here


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])  # type: ignore[arg-type]


SCALAR = _struct(
    ("stringValue", StringType()),
    ("boolValue", BooleanType()),
    ("intValue", StringType()),  # int64 as a string
    ("doubleValue", DoubleType()),
)
ANY_VALUE = _struct(
    *((f.name, f.dataType) for f in SCALAR.fields),
    ("arrayValue", _struct(("values", ArrayType(SCALAR)))),
)
KEY_VALUES = ArrayType(_struct(("key", StringType()), ("value", ANY_VALUE)))

EVENT = _struct(
    ("timeUnixNano", StringType()),
    ("name", StringType()),
    ("attributes", KEY_VALUES),
)
LINK = _struct(("traceId", StringType()), ("spanId", StringType()))
STATUS = _struct(("code", LongType()), ("message", StringType()))
SPAN = _struct(
    ("traceId", StringType()),
    ("spanId", StringType()),
    ("parentSpanId", StringType()),
    ("name", StringType()),
    ("kind", LongType()),
    ("startTimeUnixNano", StringType()),
    ("endTimeUnixNano", StringType()),
    ("attributes", KEY_VALUES),
    ("events", ArrayType(EVENT)),
    ("links", ArrayType(LINK)),
    ("status", STATUS),
)
SCOPE_SPANS = _struct(
    ("scope", _struct(("name", StringType()), ("version", StringType()))),
    ("spans", ArrayType(SPAN)),
)
RESOURCE_SPANS = _struct(
    ("resource", _struct(("attributes", KEY_VALUES))),
    ("scopeSpans", ArrayType(SCOPE_SPANS)),
)
TRACES_DATA = _struct(
    ("resourceSpans", ArrayType(RESOURCE_SPANS)),
    (CORRUPT, StringType()),
)
