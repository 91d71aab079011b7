"""A partition key's token is the one Cassandra gives it (epochal.tcm.keys.partition_token).

The expected tokens are in ``tests/fixtures/cassandra_tokens.json``, made once by
``tests/fixtures/gen_cassandra_tokens.py`` with the DataStax driver's serializers and Murmur3
(see its docstring); this test does not need the driver. Every entry checks both the bytes
hashed (Cassandra's serialization of the key) and the token, so a mismatch says which is wrong.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from epochal.tcm.keys import (
    MAX_PARTITION_KEY_BYTES,
    BadKey,
    encode_key,
    partition_token,
    serialize_partition_key,
)
from epochal.tcm.schema import ColumnType

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cassandra_tokens.json"
KEYS = json.loads(FIXTURE.read_text(encoding="utf-8"))["keys"]

FROM_JSON = {
    ColumnType.DOUBLE: float.fromhex,
    ColumnType.BLOB: bytes.fromhex,
    ColumnType.UUID: uuid.UUID,
}


def typed(entry: dict) -> tuple[tuple[tuple[str, ColumnType], ...], tuple]:
    columns = tuple((f"k{index}", ColumnType(t)) for index, t in enumerate(entry["types"]))
    values = tuple(
        FROM_JSON.get(column_type, lambda v: v)(value)
        for (_, column_type), value in zip(columns, entry["values"], strict=True)
    )
    return columns, values


@pytest.mark.parametrize(
    "entry", KEYS, ids=[f"{i}-{'+'.join(e['types'])}" for i, e in enumerate(KEYS)]
)
def test_the_token_of_a_key_is_cassandras(entry: dict) -> None:
    columns, values = typed(entry)
    assert serialize_partition_key(columns, values).hex() == entry["serialized"]
    assert partition_token(columns, values) == entry["token"]


def test_the_fixture_covers_every_column_type_alone_and_in_several_column_keys() -> None:
    alone = {e["types"][0] for e in KEYS if len(e["types"]) == 1}
    combined = {t for e in KEYS if len(e["types"]) > 1 for t in e["types"]}
    every = {t.value for t in ColumnType}
    assert alone == every, "regenerate the fixture for a new column type"
    assert combined == every
    assert {len(e["types"]) for e in KEYS} == {1, 2, 3}


def test_the_issues_example_has_cassandras_token_not_that_of_the_storage_encoding() -> None:
    columns = (("id", ColumnType.TEXT),)
    assert partition_token(columns, ("user-42",)) == 5562752747223120546
    # Storage keeps its order-preserving encoding; only the token comes from Cassandra's bytes.
    assert encode_key(columns, ("user-42",)) == b"\x01user-42\x00"


@pytest.mark.parametrize(("column_type", "empty"), [(ColumnType.TEXT, ""), (ColumnType.BLOB, b"")])
def test_an_empty_one_column_key_is_refused_as_cassandra_refuses_it(column_type, empty) -> None:
    with pytest.raises(
        BadKey, match="column 'id' may not be empty: it is the only partition-key column"
    ):
        partition_token((("id", column_type),), (empty,))


def test_empty_components_of_a_several_column_key_are_a_valid_key_as_in_cassandra() -> None:
    # CASSANDRA-11487: Cassandra accepts them (the serialized key is not empty).
    columns = (("a", ColumnType.TEXT), ("b", ColumnType.BLOB))
    assert serialize_partition_key(columns, ("", b"")) == b"\x00\x00\x00" * 2
    assert partition_token(columns, ("", b"")) != partition_token(columns, ("", b"\x00"))


def test_a_key_longer_than_cassandra_allows_is_refused() -> None:
    one = (("id", ColumnType.BLOB),)
    assert len(serialize_partition_key(one, (b"x" * MAX_PARTITION_KEY_BYTES,))) == 65535
    with pytest.raises(BadKey, match="65536 bytes serialized; the limit is 65535"):
        partition_token(one, (b"x" * 65536,))
    two = (("a", ColumnType.TEXT), ("b", ColumnType.BLOB))
    longest = b"x" * (MAX_PARTITION_KEY_BYTES - 6)
    assert len(serialize_partition_key(two, ("", longest))) == 65535
    with pytest.raises(BadKey, match="65536 bytes serialized"):
        partition_token(two, ("", longest + b"x"))


def test_a_bad_value_or_arity_is_refused_naming_the_column() -> None:
    columns = (("a", ColumnType.INT), ("b", ColumnType.TEXT))
    with pytest.raises(BadKey, match="column 'a' is int; int 2147483648 does not fit"):
        partition_token(columns, (2**31, "x"))
    with pytest.raises(BadKey, match=r"needs 2 value\(s\) \['a', 'b'\], got 1"):
        partition_token(columns, (1,))
