"""natural_changes (walks only near the changed tokens) equals comparing natural_groups of both
token maps at every point, for random rings, racks, strategies and changes."""

from __future__ import annotations

import random

from epochal.tcm import ReplicationParams, TokenMap, natural_groups
from epochal.tcm.replication import natural_changes
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN


def brute(params, before, after, locations, points):  # type: ignore[no-untyped-def]
    old = natural_groups(params, before, locations, points)
    new = natural_groups(params, after, locations, points)
    return {i: (a, b) for i, (a, b) in enumerate(zip(old, new, strict=True)) if set(a) != set(b)}


def random_case(rng: random.Random):  # type: ignore[no-untyped-def]
    datacenters = rng.randint(1, 3)
    nodes = rng.randint(1, 14)
    locations = {
        f"n{i}": (f"dc{rng.randint(1, datacenters)}", f"r{rng.randint(1, 3)}")
        for i in range(nodes + 1)
    }
    owners = {
        f"n{i}": tuple(rng.randint(MIN_TOKEN + 1, MAX_TOKEN) for _ in range(rng.randint(1, 4)))
        for i in range(nodes)
    }
    before = TokenMap(owners)
    change = rng.choice(["join", "leave", "move", "rename"])
    if change == "join":
        after = before.with_tokens(f"n{nodes}", (rng.randint(MIN_TOKEN + 1, MAX_TOKEN),))
    elif change == "leave":
        after = before.with_tokens(rng.choice(sorted(owners)), ())
    elif change == "move":
        node = rng.choice(sorted(owners))
        after = before.with_tokens(node, (rng.randint(MIN_TOKEN + 1, MAX_TOKEN),))
    else:
        after = before.renamed(rng.choice(sorted(owners)), f"n{nodes}")
    if rng.random() < 0.5:
        params = ReplicationParams.simple(rng.randint(1, 5))
    else:
        params = ReplicationParams.network_topology(
            {f"dc{d}": rng.randint(1, 3) for d in range(1, datacenters + 1)}
        )
    points = sorted(set(before.ring_tokens) | set(after.ring_tokens))
    return params, before, after, locations, points


def test_natural_changes_equals_comparing_every_point() -> None:
    rng = random.Random(20261123)
    changed = 0
    for _ in range(3000):
        case = random_case(rng)
        expected = brute(*case)
        assert natural_changes(*case) == expected, case
        changed += bool(expected)
    assert changed > 1000
