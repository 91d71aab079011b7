"""A member's roles and the changes between them, as a table (STYLE habit 4).

A member starts as a follower. It becomes a candidate when its election timeout passes (a
follower whose leader went silent, a candidate whose campaign stalled) and when, as leader, it
must run phase 1 again (a configuration its promises do not cover, or a chosen prefix its
promises reported that never came: see ``leader``). Only a candidate becomes leader, once a
quorum of every configuration it spans has promised. A candidate or a leader becomes a follower
on a higher ballot, a refusal of its own ballot, or once it no longer votes; a follower has
nothing to step down from, so it never "becomes" one again.

Every change passes ``check_role_change`` and then installs the new role's handlers (``node``,
``PaxosNode._change_role``), as etcd's raft ``becomeLeader`` installs ``stepLeader``. A change
missing from the table is a bug: it fails an assertion naming both roles.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class Role(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"


# Each role, and the roles it may change to.
LEGAL_ROLE_CHANGES: Mapping[Role, frozenset[Role]] = {
    Role.FOLLOWER: frozenset({Role.CANDIDATE}),
    Role.CANDIDATE: frozenset({Role.CANDIDATE, Role.LEADER, Role.FOLLOWER}),
    Role.LEADER: frozenset({Role.CANDIDATE, Role.FOLLOWER}),
}


def check_role_change(current: Role, new: Role) -> None:
    assert new in LEGAL_ROLE_CHANGES[current], (
        f"illegal role change from {current.value} to {new.value}"
    )
