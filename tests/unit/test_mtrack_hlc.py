"""Claims of the hybrid logical clock, driven by simulated physical clocks."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.errors import Rejected
from epochal.mtrack import (
    ClockSkew,
    HybridClock,
    format_hlc,
    logical_of,
    make_hlc,
    physical_ms_of,
)

START_MS = 1_700_000_000_000
MAX_SKEW_MS = 500
RESERVE_MS = 1_000

# One step of the simulation: move the physical clock by delta_ms, then tick or observe a peer
# whose HLC is offset_ms away from our physical clock (within the skew limit).
steps = st.lists(
    st.tuples(
        st.sampled_from(["tick", "tick", "tick", "observe"]),
        st.one_of(
            st.just(0),
            st.integers(-50, 50),
            st.integers(-100_000, 100_000),  # big jumps either way
        ),
        st.integers(-10_000, MAX_SKEW_MS),
        st.integers(0, 0xFFFF),
    ),
    max_size=300,
)


@dataclass
class Node:
    """A clock plus the model of its disk: the persisted ceiling, written before use."""

    physical_ms: int = START_MS
    disk_ceiling: int = 0
    clock: HybridClock = field(init=False)
    issued: list[int] = field(default_factory=list)
    seen: list[int] = field(default_factory=list)  # issued or observed

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.clock = HybridClock(
            max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS, ceiling=self.disk_ceiling
        )

    def tick(self) -> int:
        tick = self.clock.tick(self.physical_ms)
        if tick.persist_ceiling is not None:
            self.disk_ceiling = tick.persist_ceiling  # durable before the hlc is used
        assert tick.hlc < self.disk_ceiling, "issued a value at or above the durable ceiling"
        self.issued.append(tick.hlc)
        self.seen.append(tick.hlc)
        return tick.hlc

    def run(self, script: list[tuple[str, int, int, int]]) -> None:
        for action, delta_ms, offset_ms, logical in script:
            self.physical_ms = max(0, self.physical_ms + delta_ms)
            if action == "tick":
                before = self.clock.last
                hlc = self.tick()
                assert hlc > before
                assert hlc >= make_hlc(self.physical_ms)
            else:
                remote = make_hlc(max(0, self.physical_ms + offset_ms), logical)
                self.clock.observe(remote, self.physical_ms)
                self.seen.append(remote)
                assert self.clock.last >= remote


@settings(max_examples=200, deadline=None)
@given(steps)
def test_ticks_are_strictly_monotone_and_above_everything_observed(script):
    node = Node()
    node.run(script)
    assert node.clock.last == max(node.seen, default=0)


@settings(max_examples=200, deadline=None)
@given(steps, steps, st.integers(-100_000, 0))
def test_restart_from_the_persisted_ceiling_never_reissues_a_value(before, after, rewind_ms):
    node = Node()
    node.run(before)
    issued_before_crash = node.issued
    node.physical_ms = max(0, node.physical_ms + rewind_ms)  # the clock may come back behind
    node.restart()
    node.issued = []
    node.run(after)
    for _ in range(3):
        node.tick()
    assert min(node.issued) > max(issued_before_crash, default=0)


def test_a_fresh_clock_persists_before_its_first_value():
    clock = HybridClock(max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS)
    tick = clock.tick(START_MS)
    assert tick.hlc == make_hlc(START_MS)
    assert tick.persist_ceiling == make_hlc(START_MS + RESERVE_MS)
    assert clock.tick(START_MS + 1).persist_ceiling is None


def test_a_block_of_reserve_ms_costs_one_persist():
    clock = HybridClock(max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS)
    persists = [clock.tick(START_MS + ms).persist_ceiling for ms in range(3 * RESERVE_MS)]
    assert sum(persist is not None for persist in persists) == 3


def test_logical_overflow_in_one_millisecond_carries_into_the_millisecond():
    clock = HybridClock(max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS)
    values = [clock.tick(START_MS).hlc for _ in range(70_000)]
    assert values == sorted(set(values))
    assert (physical_ms_of(values[-1]), logical_of(values[-1])) == (START_MS + 1, 70_000 - 65_537)


def test_observe_moves_the_next_tick_past_the_remote_value():
    clock = HybridClock(max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS)
    remote = make_hlc(START_MS + MAX_SKEW_MS, 40)
    clock.observe(remote, START_MS)  # exactly at the limit is accepted
    assert clock.tick(START_MS).hlc == remote + 1


def test_observe_refuses_a_clock_too_far_ahead_with_an_actionable_message():
    clock = HybridClock(max_skew_ms=MAX_SKEW_MS, reserve_ms=RESERVE_MS)
    local = clock.tick(START_MS).hlc
    remote = make_hlc(START_MS + MAX_SKEW_MS + 1)
    with pytest.raises(ClockSkew) as raised:
        clock.observe(remote, START_MS)
    message = str(raised.value)
    assert format_hlc(remote) in message and format_hlc(make_hlc(START_MS)) in message
    assert "501 ms ahead" in message and "max_skew_ms=500" in message
    assert isinstance(raised.value, Rejected) and raised.value.rule == "clock_skew"
    assert clock.last == local  # a refused observation changes nothing


def test_format_hlc_names_utc_time_and_logical_part():
    assert format_hlc(make_hlc(START_MS, 7)) == "2023-11-14T22:13:20.000Z+7"
    assert format_hlc(make_hlc(2**47 - 1)) == "6429-10-17T02:45:55.326Z+0"
    assert format_hlc(2**64 + 5) == f"{2**48}ms+5"  # beyond year 9999 (from a bad message)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"max_skew_ms": 0, "reserve_ms": 1}, "max_skew_ms"),
        ({"max_skew_ms": 1, "reserve_ms": 0}, "reserve_ms"),
        ({"max_skew_ms": 1, "reserve_ms": 1, "ceiling": -1}, "ceiling"),
    ],
)
def test_clock_settings_are_checked(arguments, problem):
    with pytest.raises(ValueError, match=problem):
        HybridClock(**arguments)


def test_make_hlc_checks_its_parts():
    with pytest.raises(ValueError, match="logical"):
        make_hlc(1, 1 << 16)
    with pytest.raises(ValueError, match="physical_ms"):
        make_hlc(-1)
