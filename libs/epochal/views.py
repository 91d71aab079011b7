"""Cluster metadata as plain data, for the operator's command line: ``epochal status``, ``ring``,
``placements``, ``endpoints``, ``describe`` and ``log`` print these, as tables or, with
``--output json``, as they are. Pure: no I/O; everything comes from one ``ClusterMetadata`` (and,
for ``status``, what the command learnt by asking each node).

Theory of operation
-------------------
Every function returns only str, int, float, bool, None, lists and dicts with str keys, so
``json.dumps`` takes it as it is. The shapes are the commands' documented JSON: a key may be
added, never renamed or retyped. Every list comes in a stated order — tokens by value; nodes by
datacenter, rack, then id; node ids by id — where ids sort with their numbers compared as
numbers (node-2 before node-10), so two runs over one epoch print the same.

Ownership is measured on the READ groups of a keyspace's placement: the share of the ring a node
answers reads for. A range (left, right] is (right - left) mod 2**64 tokens wide, and the one
range of a one-token ring, (t, t], is the whole ring; a node's share is the widths of the ranges
whose read group holds it, over 2**64, so the shares of all nodes add up to 100 times the mean
read-group size (RF × 100 once every group is full).

A write group always holds its read group; a sequence in flight puts nodes in the write group
only, for a while, in two ways. A node it adds to a range is written to from START and read
from at MID: until then it owns nothing there and shows as ``pending``. A node it removes is no
longer read from after MID but still written to until FINISH: it shows as ``leaving``. Which of
the two a write-only member is, is read from the sequences' deltas (a member a delta removes is
leaving; any other is pending).

A key typed on the command line (``endpoints``) gets its token as the SDK computes it
(``epochal.key_text``), so the replicas shown are the ones the SDK routes the key to.

Errors: a keyspace, table or node the metadata does not know is ``UnknownName``; a key that does
not convert or does not fit its columns is ``BadKey`` (the key codec's, ``epochal.tcm.keys``).
Both are ValueErrors whose message names what was asked.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from epochal.key_text import key_token
from epochal.tcm import (
    ClusterMetadata,
    Keyspace,
    NodeInfo,
    NodeState,
    Placement,
    ReplicationParams,
    Strategy,
    Table,
    TokenRange,
)
from epochal.tcm.keys import BadKey

if TYPE_CHECKING:  # only its fields are read
    from epochal.wire.log import LogRecord

__all__ = [
    "RING_SIZE",
    "STATE_WORDS",
    "STATUS_LETTERS",
    "BadKey",
    "UnknownName",
    "effective_ownership",
    "endpoints_view",
    "log_line",
    "log_text",
    "node_state",
    "placements_view",
    "range_width",
    "ring_view",
    "schema_view",
    "sorted_ids",
    "status_view",
    "total_replication_factor",
]

RING_SIZE = 1 << 64
_SHOWN_NAMES = 10  # an UnknownName message lists this many known names, then counts the rest

# A node's state in the words nodetool uses; "down" is liveness, which the metadata does not hold.
STATE_WORDS: Mapping[NodeState, str] = {
    NodeState.REGISTERED: "registered",
    NodeState.JOINING: "joining",
    NodeState.REPLACING: "joining",
    NodeState.JOINED: "normal",
    NodeState.LEAVING: "leaving",
    NodeState.REMOVING: "leaving",
    NodeState.MOVING: "moving",
    NodeState.LEFT: "left",
}
# nodetool status' second letter for each state word (the first is U or D: up or down).
STATUS_LETTERS: Mapping[str, str] = {
    "normal": "N",
    "joining": "J",
    "leaving": "L",
    "moving": "M",
    "registered": "R",
    "left": "X",
}


class UnknownName(ValueError):
    """A keyspace, table or node the metadata does not know; ``what`` says which, ``name`` is
    the name asked for (a table as ``keyspace.table``)."""

    def __init__(self, what: str, name: str, known: Collection[str]) -> None:
        shown = sorted(known)[:_SHOWN_NAMES]
        more = f" and {len(known) - len(shown)} more" if len(known) > len(shown) else ""
        listing = f"the {what}s are {', '.join(shown)}{more}" if shown else f"there is no {what}"
        super().__init__(f"no {what} {name!r} in the cluster metadata: {listing}")
        self.what = what
        self.name = name


# ---------------------------------------------------------------------- nodes and ownership


def node_state(metadata: ClusterMetadata, node_id: str) -> str:
    """The node's state as nodetool words it: normal, joining, leaving, moving, registered,
    left."""
    return STATE_WORDS[_node(metadata, node_id).state]


def range_width(token_range: TokenRange) -> int:
    """How many tokens (left, right] spans: (right - left) mod 2**64, and the whole ring for
    (t, t]."""
    return (token_range.right - token_range.left) % RING_SIZE or RING_SIZE


def effective_ownership(metadata: ClusterMetadata, keyspace: str) -> dict[str, float]:
    """Node id -> the percentage (0..100) of the ring for which the node is in ``keyspace``'s
    read group, for every node that has not left (0.0 for one that owns nothing, and for all
    while the ring has no tokens). ``UnknownName`` for a keyspace the metadata does not
    have."""
    placement = _placement(metadata, _keyspace(metadata, keyspace))
    widths = dict.fromkeys((node.node_id for node in _present(metadata)), 0)
    for token_range, reads, _ in placement.ranges():
        width = range_width(token_range)
        for node_id in reads:
            widths[node_id] = widths.get(node_id, 0) + width
    return {node_id: 100 * width / RING_SIZE for node_id, width in widths.items()}


def total_replication_factor(params: ReplicationParams) -> int:
    """SimpleStrategy's factor, or the sum of NetworkTopologyStrategy's per-datacenter ones."""
    return sum(factor for _, factor in params.factors)


def status_view(metadata: ClusterMetadata, live: Mapping[str, Mapping[str, Any]]) -> dict:
    """What ``epochal status`` shows. ``live``: node id -> what the command learnt by asking the
    node, ``{"up": bool, "epoch": int | None, "load_bytes": int | None}``; a node missing from
    it counts as down, with neither epoch nor load known.

    ``{"epoch", "keyspaces": {name: {"replication", "replication_factor"}}, "nodes": [{"id",
    "address", "datacenter", "rack", "state", "up", "status", "epoch", "load_bytes", "tokens",
    "ownership": {keyspace: percent}}]}``: keyspaces by name, the nodes that have not left by
    datacenter, rack and id. ``state`` is the metadata's (``node_state``); ``status`` is
    nodetool's two letters, U or D then the state's (``STATUS_LETTERS``); ``tokens`` counts
    the tokens the node owns; ownership is ``effective_ownership``, unrounded."""
    names = sorted(metadata.keyspaces)
    ownership = {name: effective_ownership(metadata, name) for name in names}
    keyspaces = {
        name: {
            "replication": str(metadata.keyspaces[name].replication),
            "replication_factor": total_replication_factor(metadata.keyspaces[name].replication),
        }
        for name in names
    }
    nodes = [
        _status_row(metadata, node, live.get(node.node_id, {}), ownership)
        for node in _present(metadata)
    ]
    return {"epoch": metadata.epoch, "keyspaces": keyspaces, "nodes": nodes}


def _status_row(
    metadata: ClusterMetadata,
    node: NodeInfo,
    seen: Mapping[str, Any],
    ownership: Mapping[str, Mapping[str, float]],
) -> dict:
    state = STATE_WORDS[node.state]
    up = bool(seen.get("up", False))
    return {
        **_located(node),
        "state": state,
        "up": up,
        "status": ("U" if up else "D") + STATUS_LETTERS[state],
        "epoch": seen.get("epoch"),
        "load_bytes": seen.get("load_bytes"),
        "tokens": len(metadata.tokens.owners.get(node.node_id, ())),
        "ownership": {name: shares[node.node_id] for name, shares in ownership.items()},
    }


# ---------------------------------------------------------------------- ring and placements


def ring_view(metadata: ClusterMetadata) -> list[dict]:
    """One row per token, by token: ``{"token", "node", "address", "datacenter", "rack",
    "state", "pending"}``. The owned tokens (``pending`` false), and the tokens a sequence in
    flight gives its node when it finishes that the node does not own yet (``pending`` true: a
    join's or a move's new tokens before MID, a replacement's — the replaced node's tokens,
    shown twice — before MID). At one token an owned row comes before a pending one."""
    tokens = metadata.tokens
    rows = [
        _ring_row(metadata, token, node_id, pending=False)
        for token, node_id in zip(tokens.ring_tokens, tokens.ring_nodes, strict=True)
    ]
    for sequence in metadata.sequences.values():
        owned = set(tokens.owners.get(sequence.node_id, ()))
        rows.extend(
            _ring_row(metadata, token, sequence.node_id, pending=True)
            for token in sequence.tokens_after
            if token not in owned
        )
    return sorted(rows, key=lambda row: (row["token"], row["pending"]))


def _ring_row(metadata: ClusterMetadata, token: int, node_id: str, *, pending: bool) -> dict:
    node = _node(metadata, node_id)
    return {
        "token": token,
        "node": node.node_id,
        "address": node.address,
        "datacenter": node.datacenter,
        "rack": node.rack,
        "state": STATE_WORDS[node.state],
        "pending": pending,
    }


def placements_view(metadata: ClusterMetadata, keyspace: str) -> dict:
    """``keyspace``'s placement at this epoch: ``{"keyspace", "replication", "epoch", "ranges":
    [{"left", "right", "reads", "writes", "pending", "leaving"}]}``, the ranges in the
    placement's order (the wrapping range first), groups as sorted node ids; ``pending`` and
    ``leaving`` split writes - reads (see the module's docstring). No ranges while the ring has
    no tokens."""
    found = _keyspace(metadata, keyspace)
    removed = _removed_by_point(metadata, found.replication)
    return {
        "keyspace": keyspace,
        "replication": str(found.replication),
        "epoch": metadata.epoch,
        "ranges": [
            {
                **_bounds(token_range),
                "reads": sorted_ids(reads),
                "writes": sorted_ids(writes),
                **_write_only(reads, writes, removed.get(token_range.right, frozenset())),
            }
            for token_range, reads, writes in _placement(metadata, found).ranges()
        ],
    }


# ---------------------------------------------------------------------- endpoints of keys


def endpoints_view(
    metadata: ClusterMetadata, keyspace: str, table: str, keys: Sequence[str]
) -> list[dict]:
    """Where each key (as typed on a command line: see ``epochal.key_text``) lives, in the order
    given: ``{"key", "token", "range": {"left", "right"} | None, "replicas", "replica_ids",
    "pending", "leaving"}``. ``replicas`` are the read group's addresses, sorted;
    ``replica_ids`` its node ids, sorted by id (so not in the order of ``replicas``);
    ``pending`` and ``leaving`` the ids in the write group only, split as in
    ``placements_view``. ``range`` is None, and the groups empty, while the ring has no tokens.
    ``UnknownName`` for an unknown keyspace or table, ``BadKey`` for a key that does not
    convert."""
    found = _keyspace(metadata, keyspace)
    schema = _table(found, table)
    removed = _removed_by_point(metadata, found.replication)
    return [_endpoints_row(metadata, schema, text, removed) for text in keys]


def _endpoints_row(
    metadata: ClusterMetadata, schema: Table, text: str, removed: Mapping[int, frozenset[str]]
) -> dict:
    token = key_token(schema, text)
    reads = metadata.replica_group(schema.keyspace, token, write=False)
    writes = metadata.replica_group(schema.keyspace, token, write=True)
    token_range = metadata.token_range(schema.keyspace, token)
    moving_out = frozenset() if token_range is None else removed.get(token_range.right, frozenset())
    return {
        "key": text,
        "token": token,
        "range": None if token_range is None else _bounds(token_range),
        "replicas": sorted(metadata.nodes[node_id].address for node_id in reads),
        "replica_ids": sorted_ids(reads),
        **_write_only(reads, writes, moving_out),
    }


def _removed_by_point(
    metadata: ClusterMetadata, params: ReplicationParams
) -> dict[int, frozenset[str]]:
    """Range end -> the nodes the sequences in flight remove from the range's groups."""
    removed: dict[int, frozenset[str]] = {}
    for sequence in metadata.sequences.values():
        for delta in sequence.deltas.get(params, ()):
            removed[delta.point] = removed.get(delta.point, frozenset()) | delta.removed
    return removed


def _write_only(reads: frozenset[str], writes: frozenset[str], removed: frozenset[str]) -> dict:
    """The members of the write group only: ``pending`` (being added) and ``leaving`` (being
    removed: a sequence's delta removes them)."""
    only = writes - reads
    return {"pending": sorted_ids(only - removed), "leaving": sorted_ids(only & removed)}


# ---------------------------------------------------------------------- schema and log


def schema_view(
    metadata: ClusterMetadata, keyspace: str | None = None, table: str | None = None
) -> dict:
    """The schema, keyspaces and tables by name: ``{"keyspaces": [{"name", "replication":
    {"strategy", "factors": {datacenter: n} | {"replication_factor": n}}, "replication_type",
    "options", "created_epoch", "tables": [{"name", "id", "columns": [{"name", "type"}],
    "partition_key", "clustering_key", "options", "created_epoch"}]}]}``; only ``keyspace``
    when named, and only its ``table`` when that is named too. ``UnknownName`` for either
    when the metadata does not have it."""
    if table is not None and keyspace is None:
        raise ValueError(f"table {table!r} is named without its keyspace")
    if keyspace is None:
        chosen = [metadata.keyspaces[name] for name in sorted(metadata.keyspaces)]
    else:
        chosen = [_keyspace(metadata, keyspace)]
    return {"keyspaces": [_keyspace_schema(found, table) for found in chosen]}


def _keyspace_schema(keyspace: Keyspace, table: str | None) -> dict:
    if table is None:
        tables = [keyspace.tables[name] for name in sorted(keyspace.tables)]
    else:
        tables = [_table(keyspace, table)]
    params = keyspace.replication
    simple = params.strategy is Strategy.SIMPLE
    return {
        "name": keyspace.name,
        "replication": {
            "strategy": params.strategy.value,
            "factors": {("replication_factor" if simple else dc): n for dc, n in params.factors},
        },
        "replication_type": keyspace.replication_type.value,
        "options": dict(sorted(keyspace.options.items())),
        "created_epoch": keyspace.created_epoch,
        "tables": [_table_schema(found) for found in tables],
    }


def _table_schema(table: Table) -> dict:
    return {
        "name": table.name,
        "id": table.id,
        "columns": [{"name": column.name, "type": column.type.value} for column in table.columns],
        "partition_key": list(table.partition_key),
        "clustering_key": list(table.clustering_key),
        "options": dict(sorted(table.options.items())),
        "created_epoch": table.created_epoch,
    }


def log_line(record: LogRecord) -> dict:
    """An entry of the metadata log: ``{"epoch", "kind", "entry_id", "text"}``. ``kind`` is the
    transformation's (``"prepare_join"``) and ``text`` its description; for an entry this
    software cannot decode, ``kind`` is None and ``text`` says why. ``entry_id`` is "" when the
    log's source did not say (a replica's copy)."""
    transformation = record.transformation
    return {
        "epoch": record.epoch,
        "kind": None if transformation is None else transformation.kind,
        "entry_id": record.entry_id,
        "text": _record_text(record),
    }


def log_text(record: LogRecord) -> str:
    """The entry as one line: ``epoch 12   PrepareJoin(node-5, tokens=[250])``."""
    return f"epoch {record.epoch:<4} {_record_text(record)}"


def _record_text(record: LogRecord) -> str:
    return str(record.transformation or record.problem)


# ---------------------------------------------------------------------- lookups and order


def sorted_ids(node_ids: Iterable[str]) -> list[str]:
    """Node ids in id order, numbers compared as numbers (node-2 before node-10)."""
    return sorted(node_ids, key=_id_order)


def _id_order(node_id: str) -> tuple[tuple[str | int, ...], str]:
    parts = re.split(r"([0-9]+)", node_id)  # text at even places, digits at odd ones
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), node_id


def _present(metadata: ClusterMetadata) -> list[NodeInfo]:
    """The nodes that have not left, by datacenter, rack and id."""
    return sorted(
        (node for node in metadata.nodes.values() if node.state is not NodeState.LEFT),
        key=lambda node: (node.datacenter, node.rack, _id_order(node.node_id)),
    )


def _located(node: NodeInfo) -> dict:
    return {
        "id": node.node_id,
        "address": node.address,
        "datacenter": node.datacenter,
        "rack": node.rack,
    }


def _bounds(token_range: TokenRange) -> dict:
    return {"left": token_range.left, "right": token_range.right}


def _node(metadata: ClusterMetadata, node_id: str) -> NodeInfo:
    node = metadata.nodes.get(node_id)
    if node is None:
        raise UnknownName("node", node_id, metadata.nodes)
    return node


def _keyspace(metadata: ClusterMetadata, name: str) -> Keyspace:
    found = metadata.keyspaces.get(name)
    if found is None:
        raise UnknownName("keyspace", name, metadata.keyspaces)
    return found


def _table(keyspace: Keyspace, name: str) -> Table:
    found = keyspace.tables.get(name)
    if found is None:
        known = [f"{keyspace.name}.{table}" for table in keyspace.tables]
        raise UnknownName("table", f"{keyspace.name}.{name}", known)
    return found


def _placement(metadata: ClusterMetadata, keyspace: Keyspace) -> Placement:
    """The keyspace's placement; an empty one while nothing placed it (no tokens yet)."""
    return metadata.placements.get(keyspace.replication) or Placement((), (), ())
