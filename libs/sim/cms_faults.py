"""The faults of a simulated CMS run: crashes and restarts (half of them of the leader), power
loss (every member at once), partitions, bursts of lost Accepts with the leader dying mid-burst,
and changing drop, duplicate and delay rates; then the heal."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epochal.sim.cms_cluster import CMSCluster


class Faults:
    def __init__(self, cluster: CMSCluster) -> None:
        self.cluster = cluster
        self.healed = False

    def schedule(self, until_ms: int) -> None:
        world = self.cluster.world
        at = 0
        while True:
            at += world.rng.randint(10, 120)
            if at >= until_ms:
                return
            world.schedule(at, "fault", self._fault)

    def _crash(self, member_id: str, power_loss: bool = False) -> None:
        member = self.cluster.members[member_id]
        self.cluster.coverage.crashes += 1
        if member.crash(power_loss):
            self.cluster.coverage.crashes_losing_unsynced_state += 1

    def _fault(self) -> None:
        cluster = self.cluster
        world = cluster.world
        rng = world.rng
        faults = world.faults
        choice = rng.random()
        ids = sorted(cluster.members)
        if choice < 0.05:
            # Power loss: every member at once loses what its disk had not made durable.
            for member_id in ids:
                if cluster.members[member_id].up:
                    self._crash(member_id, power_loss=True)
            world.record("power loss")
        elif choice < 0.35:
            down = [m for m in ids if not cluster.members[m].up]
            up = [m for m in ids if cluster.members[m].up]
            if down and (rng.random() < 0.5 or len(up) <= 1):
                member_id = rng.choice(down)
                cluster.members[member_id].start()
                world.record(f"restart {member_id}")
            elif up:
                # Half the crashes aim at the leader, mid-proposal more often than not.
                leaders = [m for m in up if cluster.members[m].core.node.is_leader]
                member_id = rng.choice(leaders if leaders and rng.random() < 0.5 else up)
                self._crash(member_id)
                world.record(f"crash {member_id}")
        elif choice < 0.6:
            shuffled = list(ids)
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(ids) - 1)
            faults.partition = (frozenset(shuffled[:cut]), frozenset(shuffled[cut:]))
            world.record(f"partition {sorted(shuffled[:cut])}")
        elif choice < 0.7:
            faults.partition = None
            world.record("heal partition")
        elif choice < 0.75:
            # A burst of lost Accepts: slots get accepted by some members only. Then the leader
            # dies mid-burst, before it retransmits.
            faults.drop_probability_by_label = {"Accept": 0.7}
            world.schedule(30, "accept loss ends", faults.drop_probability_by_label.clear)
            world.schedule(rng.randint(2, 20), "leader crash", self._crash_leader)
            world.record("accept loss burst")
        else:
            faults.drop_probability = rng.choice([0.0, 0.05, 0.2, 0.4])
            faults.duplicate_probability = rng.choice([0.0, 0.05, 0.2])
            faults.max_delay_ms = rng.choice([2, 5, 20])
            faults.slow_probability = rng.choice([0.0, 0.02, 0.1])
            world.record(
                f"network drop={faults.drop_probability} dup={faults.duplicate_probability}"
            )

    def _crash_leader(self) -> None:
        if self.healed:
            return
        for member in self.cluster.members.values():
            if member.up and member.core.node.is_leader:
                self._crash(member.id)
                self.cluster.world.record(f"crash leader {member.id}")

    def heal(self) -> None:
        self.healed = True
        world = self.cluster.world
        faults = world.faults
        faults.partition = None
        faults.drop_probability = 0.0
        faults.duplicate_probability = 0.0
        faults.max_delay_ms = 4
        faults.slow_probability = 0.0
        faults.drop_probability_by_label.clear()
        for member in self.cluster.members.values():
            if not member.up:
                member.start()
        world.record("heal all")
