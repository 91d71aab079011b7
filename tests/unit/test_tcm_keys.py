"""Claims of the order-preserving key encoding (epochal.tcm.keys).

The naive model is the Python tuple of the values: the encoded bytes must sort like the tuples,
decode back to them, and a slice over encoded prefixes must select exactly the keys whose
leading components a plain tuple comparison puts between the bounds.

DOUBLE and the sign of zero: the encoding keeps the IEEE sign bit, so ``-0.0`` and ``0.0`` are
two different keys, ``-0.0`` sorting just before ``0.0`` and decoding back to ``-0.0`` (Python
says ``-0.0 == 0.0``). The naive model spells that out in ``_order_of``.

A partition key's token is not computed from this encoding but from Cassandra's serialization
of the key: ``test_tcm_cassandra_tokens.py`` checks it.
"""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochal.tcm.keys import (
    EVERYTHING,
    BadKey,
    KeyBounds,
    check_value,
    decode_key,
    encode_key,
    slice_bounds,
)
from epochal.tcm.schema import ColumnType

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    edges = st.sampled_from([low, low + 1, -1, 0, 1, high - 1, high])
    return edges | st.integers(low, high)


_NASTY_TEXT = st.sampled_from(["", "\x00", "a\x00", "a\x00\x00", "a", "a\x01", "\x7f", "é", "😀"])
_NASTY_BLOB = st.sampled_from([b"", b"\x00", b"\x00\xff", b"\xff", b"\xff\x00", b"a\x00", b"a"])

VALUES: dict[ColumnType, st.SearchStrategy] = {
    ColumnType.TEXT: _NASTY_TEXT | st.text(alphabet=st.sampled_from("\x00\x01aé😀"), max_size=4),
    ColumnType.INT: _ints(*INT32),
    ColumnType.BIGINT: _ints(*INT64),
    ColumnType.TIMESTAMP: _ints(*INT64),
    ColumnType.BOOLEAN: st.booleans(),
    ColumnType.DOUBLE: st.sampled_from([-0.0, 0.0, -math.inf, math.inf, -1.5, 5e-324])
    | st.floats(allow_nan=False),
    ColumnType.BLOB: _NASTY_BLOB | st.binary(max_size=4),
    ColumnType.UUID: st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]) | st.uuids(),
}

Columns = tuple[tuple[str, ColumnType], ...]


def _order_of(column_type: ColumnType, value: object) -> object:
    """The naive sort key of one value: itself, except that the sign breaks a tie at zero."""
    if column_type is ColumnType.DOUBLE:
        return (value, math.copysign(1.0, value))  # type: ignore[arg-type]
    return value


def _naive(columns: Columns, values: tuple) -> tuple:
    return tuple(_order_of(t, v) for (_, t), v in zip(columns, values, strict=False))


column_lists = st.lists(st.sampled_from(list(ColumnType)), min_size=1, max_size=3).map(
    lambda types: tuple((f"c{i}", t) for i, t in enumerate(types))
)


def keys_of(columns: Columns) -> st.SearchStrategy[tuple]:
    return st.tuples(*(VALUES[t] for _, t in columns))


@st.composite
def columns_and_keys(draw, min_keys: int = 2, max_keys: int = 12):
    columns = draw(column_lists)
    # Keys sharing leading components exercise the component boundaries.
    base = draw(keys_of(columns))
    keys = draw(
        st.lists(
            st.one_of(
                keys_of(columns),
                st.integers(0, len(columns)).flatmap(
                    lambda n: keys_of(columns).map(lambda k: base[:n] + k[n:])
                ),
            ),
            min_size=min_keys,
            max_size=max_keys,
        )
    )
    return columns, keys


@given(columns_and_keys())
def test_encoded_keys_sort_like_the_tuples_and_decode_back(case):
    columns, keys = case
    # A list, not a dict: (-0.0,) and (0.0,) are equal dict keys but different keys here.
    encoded = [(key, encode_key(columns, key)) for key in keys]
    for a, data_a in encoded:
        for b, data_b in encoded:
            naive_a, naive_b = _naive(columns, a), _naive(columns, b)
            assert (data_a < data_b) == (naive_a < naive_b), (a, b)
            assert (data_a == data_b) == (naive_a == naive_b), (a, b)
    for key, data in encoded:
        decoded = decode_key(columns, data)
        assert _naive(columns, decoded) == _naive(columns, key)
        assert [type(v) for v in decoded] == [type(v) for v in key]


def test_negative_zero_is_a_distinct_key_just_below_positive_zero():
    columns = (("d", ColumnType.DOUBLE),)
    smallest_negative = encode_key(columns, (-5e-324,))
    negative_zero = encode_key(columns, (-0.0,))
    positive_zero = encode_key(columns, (0.0,))
    assert smallest_negative < negative_zero < positive_zero
    (decoded,) = decode_key(columns, negative_zero)
    assert decoded == 0.0 and math.copysign(1.0, decoded) == -1.0


def test_a_zero_byte_inside_text_or_blob_sorts_after_the_shorter_value_and_its_extensions():
    # "a" < "a\x00" as strings; but ("a", anything) must also sort before ("a\x00", ...).
    for column_type, short, longer in (
        (ColumnType.TEXT, "a", "a\x00"),
        (ColumnType.BLOB, b"a", b"a\x00"),
    ):
        columns = (("x", column_type), ("y", ColumnType.BLOB))
        assert encode_key(columns, (short, b"\xff" * 4)) < encode_key(columns, (longer, b""))


@st.composite
def slices(draw):
    columns, keys = draw(columns_and_keys(min_keys=1))

    def bound():
        n = draw(st.integers(0, len(columns)))
        source = draw(st.sampled_from(keys) | keys_of(columns))  # often an existing key's prefix
        return draw(st.none() | st.just(source[:n]))

    return columns, keys, bound(), draw(st.booleans()), bound(), draw(st.booleans())


@given(slices())
def test_slice_bounds_select_what_a_naive_filter_on_tuples_selects(case):
    columns, keys, start, start_exclusive, end, end_exclusive = case

    def naive_selects(key: tuple) -> bool:
        ok = True
        if start is not None:
            head, low = _naive(columns, key[: len(start)]), _naive(columns, start)
            ok = ok and (head > low if start_exclusive else head >= low)
        if end is not None:
            head, high = _naive(columns, key[: len(end)]), _naive(columns, end)
            ok = ok and (head < high if end_exclusive else head <= high)
        return ok

    bounds = slice_bounds(
        None if start is None else encode_key(columns, start, prefix=True),
        start_exclusive,
        None if end is None else encode_key(columns, end, prefix=True),
        end_exclusive,
    )
    for key in keys:
        assert bounds.contains(encode_key(columns, key)) == naive_selects(key), key


def test_the_empty_prefix_selects_everything_inclusive_and_nothing_exclusive():
    columns = (("c", ColumnType.INT),)
    key = encode_key(columns, (INT32[1],))
    assert slice_bounds(b"", False, b"", False).contains(key)
    assert not slice_bounds(b"", True, None, False).contains(key)
    assert not slice_bounds(None, False, b"", True).contains(key)
    assert slice_bounds(None, False, None, False) == EVERYTHING == KeyBounds()


@pytest.mark.parametrize(
    ("column_type", "value", "shown"),
    [
        (ColumnType.TEXT, b"x", "bytes b'x'"),
        (ColumnType.TEXT, None, "null"),
        (ColumnType.INT, True, "bool True"),
        (ColumnType.INT, INT32[1] + 1, f"int {INT32[1] + 1}"),
        (ColumnType.INT, INT32[0] - 1, f"int {INT32[0] - 1}"),
        (ColumnType.INT, "1", "str '1'"),
        (ColumnType.BIGINT, INT64[1] + 1, f"int {INT64[1] + 1}"),
        (ColumnType.TIMESTAMP, INT64[0] - 1, f"int {INT64[0] - 1}"),
        (ColumnType.TIMESTAMP, 1.0, "float 1.0"),
        (ColumnType.BOOLEAN, 1, "int 1"),
        (ColumnType.DOUBLE, math.nan, "NaN"),
        (ColumnType.DOUBLE, 1, "int 1"),  # an int is not a double: no silent conversion
        (ColumnType.BLOB, "x", "str 'x'"),
        (ColumnType.BLOB, bytearray(b"x"), "bytearray"),
        (ColumnType.UUID, "00000000-0000-0000-0000-000000000000", "str"),
    ],
)
def test_a_value_that_does_not_fit_raises_bad_key_naming_the_column(column_type, value, shown):
    columns = (("first", ColumnType.BOOLEAN), ("the_column", column_type))
    with pytest.raises(BadKey, match=f"column 'the_column' is {column_type.value}; ") as raised:
        encode_key(columns, (True, value))
    assert shown in str(raised.value)
    with pytest.raises(BadKey, match="'the_column'"):
        check_value("the_column", column_type, value)


def test_a_long_value_is_shown_shortened_in_the_error():
    with pytest.raises(BadKey) as raised:
        check_value("c", ColumnType.INT, "x" * 100)
    assert "…" in str(raised.value) and "x" * 50 not in str(raised.value)


def test_wrong_arity_raises_bad_key_naming_the_columns():
    columns = (("a", ColumnType.INT), ("b", ColumnType.TEXT))
    with pytest.raises(BadKey, match=r"needs 2 value\(s\) \['a', 'b'\], got 1"):
        encode_key(columns, (1,))
    with pytest.raises(BadKey, match=r"needs 2 value\(s\) \['a', 'b'\], got 3"):
        encode_key(columns, (1, "x", 2))
    with pytest.raises(BadKey, match=r"needs at most 2 value\(s\) \['a', 'b'\], got 3"):
        encode_key(columns, (1, "x", 2), prefix=True)
    assert encode_key(columns, (1,), prefix=True) == encode_key(columns[:1], (1,))
    assert encode_key(columns, (), prefix=True) == b""


def test_decoding_malformed_bytes_raises_bad_key_naming_the_column():
    columns = (("a", ColumnType.INT), ("b", ColumnType.TEXT))
    data = encode_key(columns, (1, "x"))
    with pytest.raises(BadKey, match="malformed at column 'b'"):
        decode_key(columns, data[:9] + b"\x02" + data[10:])
    with pytest.raises(BadKey, match="trailing bytes"):
        decode_key(columns, data + b"\x01")
