"""The SDK takes a consistency level as the enum or its name, in any case, for the client and
for each call; anything else is refused with the levels named (it raised ``KeyError: 'QUORUM'``).
The package says it is typed (PEP 561)."""

from __future__ import annotations

from importlib.resources import files

import pytest

from epochal.client import AsyncClient, Consistency
from epochal.errors import InvalidRequest


@pytest.mark.parametrize(
    ("given", "level"),
    [
        (Consistency.ALL, Consistency.ALL),
        ("QUORUM", Consistency.QUORUM),
        ("quorum", Consistency.QUORUM),
        (" local_quorum ", Consistency.LOCAL_QUORUM),
        ("One", Consistency.ONE),
    ],
)
def test_a_level_is_the_enum_or_its_name_in_any_case(
    given: Consistency | str, level: Consistency
) -> None:
    assert Consistency.of(given) is level
    client = AsyncClient(["127.0.0.1:1"], consistency=given, local_dc="dc1")
    assert client.consistency is level
    local = AsyncClient(["127.0.0.1:1"], local_dc="dc1")
    assert local._level(given) is level  # a call's own level
    assert client._level(None) is level  # else the client's


@pytest.mark.parametrize("given", ["QUOROM", "", "each_quorum", 2, None, b"ONE"])
def test_anything_else_is_refused_naming_the_levels(given: object) -> None:
    with pytest.raises(InvalidRequest) as refused:
        Consistency.of(given)  # type: ignore[arg-type]
    assert "is not a level: one of ONE, QUORUM, LOCAL_QUORUM, ALL" in refused.value.message
    if given is not None:  # None is the client's default level
        with pytest.raises(InvalidRequest):
            AsyncClient(["127.0.0.1:1"], consistency=given)  # type: ignore[arg-type]


def test_the_package_is_typed() -> None:
    assert files("epochal").joinpath("py.typed").is_file()
