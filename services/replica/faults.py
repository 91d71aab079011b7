"""Faults a test injects into a running replica (``ReplicaTesting.SetHooks``, served only with
``--enable-test-hooks``): refuse a share of the writes other coordinators send, or refuse every
request of other replicas and reconcilers (an isolated replica whose clients still reach it)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Faults:
    drop_write_share: float = 0.0  # 0..1 of the coordinators' writes from other nodes
    isolated: bool = False
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def drops_write(self) -> bool:
        """Whether to refuse the write arriving now (OVERLOADED, nothing stored)."""
        return self.drop_write_share > 0 and self._random.random() < self.drop_write_share

    def set(self, *, drop_write_share: float, isolated: bool) -> None:
        if not 0.0 <= drop_write_share <= 1.0:
            raise ValueError(f"drop_write_share must be in 0..1, got {drop_write_share}")
        self.drop_write_share = drop_write_share
        self.isolated = isolated


ISOLATED = "isolated by a test hook (--enable-test-hooks)"
