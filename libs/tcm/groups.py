"""Transformation kinds grouped for metrics: a label with a handful of values (a commit-latency
histogram per kind would be 22 of them), each group answering one operator question — are DDL
commits slow, are joins, are lease grants.

``schema``: DDL from clients; ``registration``: nodes and reconcilers registering; ``topology``:
the steps of joins, leaves, replacements and moves; ``lease``: reconciliation lease grants;
``cms``: CMS membership; ``snapshot``: snapshot requests sent as commits (the leader's own
periodic snapshots are not client commits, so the CMS's commit latency does not count them).
"""

from __future__ import annotations

GROUPS = ("schema", "registration", "topology", "lease", "cms", "snapshot")

KIND_GROUPS: dict[str, str] = {
    "create_keyspace": "schema",
    "alter_keyspace": "schema",
    "drop_keyspace": "schema",
    "create_table": "schema",
    "alter_table": "schema",
    "drop_table": "schema",
    "register": "registration",
    "unregister": "registration",
    "register_reconciler": "registration",
    "prepare_join": "topology",
    "prepare_leave": "topology",
    "prepare_replace": "topology",
    "prepare_move": "topology",
    "advance_sequence": "topology",
    "cancel_sequence": "topology",
    "grant_reconcile_lease": "lease",
    "initialize_cms": "cms",
    "add_cms_candidate": "cms",
    "start_add_to_cms": "cms",
    "finish_add_to_cms": "cms",
    "remove_from_cms": "cms",
    "trigger_snapshot": "snapshot",
}


def group_of(kind: str) -> str:
    """The group of a transformation kind; ``other`` for a kind this table does not know (a
    unit test keeps every transformation in it)."""
    return KIND_GROUPS.get(kind, "other")
