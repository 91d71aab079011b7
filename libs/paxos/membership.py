"""Which members vote on which slot.

A configuration governs slots from ``from_slot`` until the next configuration's ``from_slot``.
The shell adds a configuration when it applies a slot s that changes the voters, effective at
s + α (α = ``max_in_flight_slots``): a leader only proposes slot s once s - α is chosen, so it
always knows the voters of a slot it proposes. Phase 1 covers every slot from a point on, so
it needs a quorum of every configuration that governs that span.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class Configuration:
    from_slot: int
    voters: frozenset[str]
    learners: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.from_slot < 1:
            raise ValueError(f"configuration from_slot must be >= 1, got {self.from_slot}")
        if not self.voters:
            raise ValueError("a configuration needs at least one voter")
        if self.voters & self.learners:
            raise ValueError(
                f"members both voter and learner: {sorted(self.voters & self.learners)}"
            )

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def is_quorum(self, members: set[str] | frozenset[str]) -> bool:
        return len(self.voters & members) >= self.quorum


@dataclass(frozen=True, slots=True)
class Membership:
    """Configurations in slot order; immutable, ``with_configuration`` returns a new one."""

    configurations: tuple[Configuration, ...]

    def __post_init__(self) -> None:
        if not self.configurations or self.configurations[0].from_slot != 1:
            raise ValueError("membership must start with a configuration governing slot 1")
        slots = [c.from_slot for c in self.configurations]
        if slots != sorted(set(slots)):
            raise ValueError(f"configurations must have increasing from_slot, got {slots}")

    @classmethod
    def initial(cls, voters: frozenset[str], learners: frozenset[str] = frozenset()) -> Membership:
        return cls((Configuration(from_slot=1, voters=voters, learners=learners),))

    def governing(self, slot: int) -> Configuration:
        chosen = self.configurations[0]
        for configuration in self.configurations:
            if configuration.from_slot > slot:
                break
            chosen = configuration
        return chosen

    def spanning(self, from_slot: int) -> tuple[Configuration, ...]:
        """Every configuration that governs some slot >= from_slot."""
        first = self.governing(from_slot)
        return tuple(c for c in self.configurations if c.from_slot >= first.from_slot)

    def everyone(self, from_slot: int) -> frozenset[str]:
        members: set[str] = set()
        for configuration in self.spanning(from_slot):
            members |= configuration.voters | configuration.learners
        return frozenset(members)

    def with_configuration(self, configuration: Configuration) -> Membership:
        if configuration.from_slot <= self.configurations[-1].from_slot:
            raise ValueError(
                f"new configuration must start after slot {self.configurations[-1].from_slot}, "
                f"got {configuration.from_slot}"
            )
        return Membership((*self.configurations, configuration))
