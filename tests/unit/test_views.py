"""The operator's views of the cluster metadata (epochal.views, epochal.key_text), on rings built
through the real transformations: ownership adds up to RF × 100 over the read groups whatever
the strategy, the number of tokens or a join in flight; the placements shown are the metadata's
exactly; a key typed on a command line gets the SDK's token and the replicas the metadata names
for it; bad keys and unknown names are refused with a message that says what was asked; and
every view is plain JSON."""

from __future__ import annotations

import json
import uuid

import pytest

from epochal import encoding
from epochal.tcm import (
    Column,
    ColumnType,
    CreateTable,
    NodeState,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
    ReplicationParams,
    Step,
)
from epochal.views import (
    RING_SIZE,
    STATE_WORDS,
    STATUS_LETTERS,
    BadKey,
    UnknownName,
    effective_ownership,
    endpoints_view,
    log_line,
    log_text,
    node_state,
    placements_view,
    ring_view,
    schema_view,
    sorted_ids,
    status_view,
)
from epochal.wire.log import LogRecord

from .seed_ring import JOIN_STEPS, RF2, Cluster, ring, ring_of_four

NTS = ReplicationParams.network_topology({"dc1": 2, "dc2": 1})
TYPED_KEY = {  # a partition-key column of every type: its text, and the value it stands for
    ColumnType.TEXT: ("hello", "hello"),
    ColumnType.INT: ("-5", -5),
    ColumnType.BIGINT: ("1099511627776", 2**40),
    ColumnType.BOOLEAN: ("TRUE", True),
    ColumnType.DOUBLE: ("-0.5", -0.5),
    ColumnType.BLOB: ("0x00ff", b"\x00\xff"),
    ColumnType.UUID: (str(uuid.UUID(int=7)), uuid.UUID(int=7)),
    ColumnType.TIMESTAMP: ("1700000000000", 1_700_000_000_000),
}


def join_allocated(cluster: Cluster, name: str, num_tokens: int = 8, steps=JOIN_STEPS) -> str:
    """Register ``name`` and join it with ``num_tokens`` tokens the allocator picks."""
    node_id = cluster.register(name)
    cluster.apply(PrepareJoin(node_id=node_id, num_tokens=num_tokens))
    cluster.advance(node_id, *steps)
    return node_id


def with_tables(cluster: Cluster, keyspace: str = "ks") -> Cluster:
    """Table ``pairs`` (partition key id int, name text; clustering c) and ``typed`` (a
    partition-key column of every type) in ``keyspace``."""
    cluster.apply(
        CreateTable(
            keyspace=keyspace,
            name="pairs",
            columns=(
                Column("id", ColumnType.INT),
                Column("name", ColumnType.TEXT),
                Column("c", ColumnType.BIGINT),
                Column("v", ColumnType.TEXT),
            ),
            partition_key=("id", "name"),
            clustering_key=("c",),
            options=(("gc_grace_seconds", "3600"),),
        ),
        CreateTable(
            keyspace=keyspace,
            name="typed",
            columns=tuple(Column(f"k_{t.value}", t) for t in TYPED_KEY),
            partition_key=tuple(f"k_{t.value}" for t in TYPED_KEY),
        ),
    )
    return cluster


def assert_sums_to(shares: dict[str, float], percent: float) -> None:
    assert all(0.0 <= share <= 100.0 for share in shares.values()), shares
    assert sum(shares.values()) == pytest.approx(percent, abs=1e-6)


def assert_plain_json(view: object) -> None:
    """Only JSON's own types: a tuple, a set or an enum would not come back equal."""
    assert json.loads(json.dumps(view)) == view


# ---------------------------------------------------------------------- node states


def test_every_node_state_has_a_word_and_every_word_a_status_letter() -> None:
    assert set(STATE_WORDS) == set(NodeState)
    assert set(STATE_WORDS.values()) == set(STATUS_LETTERS)


def prepared(operation: str) -> tuple[Cluster, str]:
    """The seed's ring with one operation prepared: the cluster and the node it acts on."""
    cluster = ring_of_four()
    a, c = cluster.ids["A"], cluster.ids["C"]
    if operation == "register":
        return cluster, cluster.register("E")
    if operation == "join":
        return cluster, cluster.join("E", 250, ())
    if operation == "replace":
        replacement = cluster.register("F")
        cluster.apply(PrepareReplace(node_id=replacement, replaced=c))
        return cluster, replacement
    if operation == "move":
        cluster.apply(PrepareMove(node_id=a, tokens=(50,)))
    elif operation in ("decommission", "remove"):
        cluster.apply(PrepareLeave(node_id=a, remove=operation == "remove"))
    return cluster, a


@pytest.mark.parametrize(
    ("operation", "word"),
    [
        ("register", "registered"),
        ("join", "joining"),
        ("replace", "joining"),
        ("none", "normal"),
        ("move", "moving"),
        ("decommission", "leaving"),
        ("remove", "leaving"),
    ],
)
def test_node_states_through_the_real_operations(operation: str, word: str) -> None:
    cluster, node_id = prepared(operation)
    assert node_state(cluster.md, node_id) == word


def test_an_unknown_node_has_no_state() -> None:
    with pytest.raises(UnknownName, match="no node 'node-99' in the cluster metadata"):
        node_state(ring_of_four().md, "node-99")


def test_a_decommission_is_leaving_then_left_and_a_left_node_is_shown_nowhere() -> None:
    cluster = ring_of_four()
    leaving = cluster.ids["B"]
    cluster.apply(PrepareLeave(node_id=leaving))
    assert node_state(cluster.md, leaving) == "leaving"
    cluster.advance(leaving, *JOIN_STEPS)
    assert node_state(cluster.md, leaving) == "left"
    assert leaving not in effective_ownership(cluster.md, "ks")
    assert leaving not in [row["id"] for row in status_view(cluster.md, {})["nodes"]]
    assert leaving not in [row["node"] for row in ring_view(cluster.md)]


# ---------------------------------------------------------------------- ownership


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_ownership_adds_up_to_the_replication_factor_times_100(factor: int) -> None:
    cluster = Cluster({"ks": ReplicationParams.simple(factor)})
    for name in "ABCDE":
        join_allocated(cluster, name)
    shares = effective_ownership(cluster.md, "ks")
    assert set(shares) == set(cluster.ids.values())
    assert_sums_to(shares, factor * 100)


def test_ownership_under_network_topology_adds_up_per_datacenter() -> None:
    cluster = Cluster({"nts": NTS}, datacenters={"D": "dc2", "E": "dc2"})
    for name in "ABCDE":
        join_allocated(cluster, name)
    shares = effective_ownership(cluster.md, "nts")
    dc2 = cluster.of("D", "E")
    assert_sums_to(shares, 300)
    assert sum(share for n, share in shares.items() if n not in dc2) == pytest.approx(200)
    assert sum(share for n, share in shares.items() if n in dc2) == pytest.approx(100)


def test_ownership_is_the_width_of_the_ranges_read_from() -> None:
    cluster = ring({"A": 0, "B": 2**62}, Cluster({"one": ReplicationParams.simple(1)}))
    # A reads (2**62, 0], wrapping: three quarters of the ring; B reads (0, 2**62].
    assert effective_ownership(cluster.md, "one") == {
        cluster.ids["A"]: 75.0,
        cluster.ids["B"]: 25.0,
    }


def test_a_one_token_ring_is_owned_whole_and_is_one_range() -> None:
    keyspaces = {"one": ReplicationParams.simple(1), "three": ReplicationParams.simple(3)}
    cluster = ring({"A": 100}, Cluster(keyspaces))
    only = cluster.ids["A"]
    for keyspace in keyspaces:
        assert effective_ownership(cluster.md, keyspace) == {only: 100.0}
        ranges = placements_view(cluster.md, keyspace)["ranges"]
        assert ranges == [
            {
                "left": 100,
                "right": 100,
                "reads": [only],
                "writes": [only],
                "pending": [],
                "leaving": [],
            }
        ]
    assert status_view(cluster.md, {})["nodes"][0]["tokens"] == 1


def test_a_ring_without_tokens_owns_nothing_and_places_nowhere() -> None:
    cluster = with_tables(Cluster())
    registered = cluster.register("A")
    assert effective_ownership(cluster.md, "ks") == {registered: 0.0}
    assert placements_view(cluster.md, "ks")["ranges"] == []
    (row,) = endpoints_view(cluster.md, "ks", "pairs", ["1:a"])
    assert (row["range"], row["replicas"], row["replica_ids"], row["pending"]) == (None, [], [], [])
    assert (
        row["token"]
        == encoding.partition(cluster.md.keyspaces["ks"].tables["pairs"], {"id": 1, "name": "a"})[1]
    )


# ---------------------------------------------------------------------- a join in flight


def joining_at_250(*steps: Step) -> tuple[Cluster, str]:
    cluster = ring_of_four()
    return cluster, cluster.join("E", 250, steps)


def test_a_join_before_mid_is_pending_everywhere_and_owns_nothing() -> None:
    cluster, joining = joining_at_250(Step.START)
    ranges = placements_view(cluster.md, "ks")["ranges"]
    assert any(joining in r["pending"] and joining in r["writes"] for r in ranges)
    assert not any(joining in r["reads"] for r in ranges)
    shares = effective_ownership(cluster.md, "ks")
    assert shares[joining] == 0.0
    assert_sums_to(shares, 200)
    pending = [row for row in ring_view(cluster.md) if row["pending"]]
    assert pending == [
        {
            "token": 250,
            "node": joining,
            "address": "E:7000",
            "datacenter": "dc1",
            "rack": "r1",
            "state": "joining",
            "pending": True,
        }
    ]
    assert [row["token"] for row in ring_view(cluster.md)] == [0, 100, 200, 250, 300]


def test_a_join_after_mid_owns_its_token_and_the_old_replica_is_leaving() -> None:
    cluster, joining = joining_at_250(Step.START, Step.MID)
    ranges = placements_view(cluster.md, "ks")["ranges"]
    # E at 250 takes (100, 200] from C and (200, 250] from D: read from no more, written to
    # until FINISH.
    assert {n for r in ranges for n in r["leaving"]} == cluster.of("C", "D")
    assert not any(r["pending"] for r in ranges)
    shares = effective_ownership(cluster.md, "ks")
    assert shares[joining] > 0.0
    assert_sums_to(shares, 200)
    assert not any(row["pending"] for row in ring_view(cluster.md))


def test_a_replacement_in_flight_shows_the_dead_nodes_tokens_twice() -> None:
    cluster = ring_of_four()
    dead = cluster.ids["C"]
    replacement = cluster.register("F")
    cluster.apply(PrepareReplace(node_id=replacement, replaced=dead))
    rows = [row for row in ring_view(cluster.md) if row["token"] == 300]
    assert [(r["node"], r["state"], r["pending"]) for r in rows] == [
        (dead, "normal", False),
        (replacement, "joining", True),
    ]


def test_the_placements_shown_are_the_metadatas_at_every_epoch_of_a_join() -> None:
    cluster, _ = joining_at_250(*JOIN_STEPS)
    for metadata in cluster.history:  # the joins of A to E, one at a time
        if "ks" not in metadata.keyspaces:
            continue
        view = placements_view(metadata, "ks")
        placement = metadata.placements.get(RF2)
        expected = [] if placement is None else placement.ranges()
        assert view["epoch"] == metadata.epoch
        assert view["replication"] == "SimpleStrategy(rf=2)"
        assert len(view["ranges"]) == len(expected)
        for shown, (token_range, reads, writes) in zip(view["ranges"], expected, strict=True):
            assert (shown["left"], shown["right"]) == (token_range.left, token_range.right)
            assert shown["reads"] == sorted_ids(reads) and set(shown["reads"]) == reads
            assert set(shown["writes"]) == writes
            assert set(shown["pending"]) | set(shown["leaving"]) == writes - reads
            assert not set(shown["pending"]) & set(shown["leaving"])
            after_mid = any(s.done is Step.MID for s in metadata.sequences.values())
            assert shown["pending" if after_mid else "leaving"] == []
        assert_plain_json(view)


# ---------------------------------------------------------------------- endpoints of keys


@pytest.mark.parametrize(
    ("steps", "write_only"), [((Step.START,), "pending"), ((Step.START, Step.MID), "leaving")]
)
def test_endpoints_are_the_sdks_token_and_the_metadatas_replicas(
    steps: tuple[Step, ...], write_only: str
) -> None:
    # Tokens spread over the ring, so that keys land in the ranges the join changes.
    cluster = with_tables(ring({"A": -(2**62), "B": 0, "C": 2**62, "D": 2**63 - 1}))
    cluster.join("E", 2**61, steps)
    metadata = cluster.md
    schema = metadata.keyspaces["ks"].tables["pairs"]
    keys = [(i * 7919 - 5000, f"name {i}") for i in range(300)]
    rows = endpoints_view(metadata, "ks", "pairs", [f"{i}:{name}" for i, name in keys])
    assert any(row[write_only] for row in rows)
    for (number, name), row in zip(keys, rows, strict=True):
        token = encoding.partition(schema, {"id": number, "name": name})[1]
        reads = metadata.replica_group("ks", token, write=False)
        writes = metadata.replica_group("ks", token, write=True)
        token_range = metadata.token_range("ks", token)
        assert row == {
            "key": f"{number}:{name}",
            "token": token,
            "range": {"left": token_range.left, "right": token_range.right},
            "replicas": sorted(metadata.nodes[n].address for n in reads),
            "replica_ids": sorted_ids(reads),
            "pending": [],
            "leaving": [],
            write_only: sorted_ids(writes - reads),
        }
    assert_plain_json(rows)


def test_a_key_of_every_column_type_converts_to_the_values_the_sdk_takes() -> None:
    cluster = with_tables(ring_of_four())
    schema = cluster.md.keyspaces["ks"].tables["typed"]
    text = ":".join(shown for shown, _ in TYPED_KEY.values())
    values = {f"k_{t.value}": value for t, (_, value) in TYPED_KEY.items()}
    (row,) = endpoints_view(cluster.md, "ks", "typed", [text])
    assert row["token"] == encoding.partition(schema, values)[1]


def test_the_last_component_of_a_key_keeps_its_colons() -> None:
    cluster = with_tables(ring_of_four())
    schema = cluster.md.keyspaces["ks"].tables["pairs"]
    (row,) = endpoints_view(cluster.md, "ks", "pairs", ["7:a:b"])
    assert row["token"] == encoding.partition(schema, {"id": 7, "name": "a:b"})[1]


@pytest.mark.parametrize(
    ("table", "text", "reason"),
    [
        ("pairs", "x:ann", "column id is int: 'x' is not an integer"),
        ("pairs", "1.5:ann", "column id is int: '1.5' is not an integer"),
        ("pairs", "7", "the partition key is 2 values, typed as id:name"),
        ("pairs", "2147483648:ann", "column 'id' is int; int 2147483648 does not fit"),
        ("typed", "a:1:2:yes:0:00:" + "0" * 32 + ":3", "column k_boolean is boolean: 'yes' is not"),
        ("typed", "a:1:2:true:nope:00:" + "0" * 32 + ":3", "column k_double is double: 'nope'"),
        (
            "typed",
            "a:1:2:true:0:0xzz:" + "0" * 32 + ":3",
            "column k_blob is blob: '0xzz' is not hex",
        ),
        (
            "typed",
            "a:1:2:true:0:00:not-a-uuid:3",
            "column k_uuid is uuid: 'not-a-uuid' is not a UUID",
        ),
        ("typed", "a:1:2:true:0:00:" + "0" * 32 + ":now", "column k_timestamp is timestamp: 'now'"),
        ("typed", "a:1:2:true:nan:00:" + "0" * 32 + ":3", "column 'k_double' is double; NaN"),
    ],
)
def test_a_key_that_does_not_convert_is_refused_naming_key_table_and_column(
    table: str, text: str, reason: str
) -> None:
    cluster = with_tables(ring_of_four())
    with pytest.raises(BadKey) as raised:
        endpoints_view(cluster.md, "ks", table, ["1:fine", text] if table == "pairs" else [text])
    assert str(raised.value).startswith(f"key {text!r} of table ks.{table}: {reason}")


def test_an_empty_one_column_key_is_refused_as_cassandra_refuses_it() -> None:
    cluster = Cluster()
    cluster.apply(
        CreateTable(
            keyspace="ks",
            name="by_name",
            columns=(Column("name", ColumnType.TEXT),),
            partition_key=("name",),
        )
    )
    with pytest.raises(
        BadKey, match=r"key '' of table ks\.by_name: column 'name' may not be empty"
    ):
        endpoints_view(cluster.md, "ks", "by_name", [""])


def test_unknown_keyspaces_and_tables_are_refused_naming_what_exists() -> None:
    metadata = with_tables(ring_of_four()).md
    missing_keyspace = "no keyspace 'nope' in the cluster metadata: the keyspaces are ks"
    for call in (
        lambda: effective_ownership(metadata, "nope"),
        lambda: placements_view(metadata, "nope"),
        lambda: endpoints_view(metadata, "nope", "pairs", ["1:a"]),
        lambda: schema_view(metadata, "nope"),
    ):
        with pytest.raises(UnknownName) as raised:
            call()
        assert str(raised.value) == missing_keyspace
        assert (raised.value.what, raised.value.name) == ("keyspace", "nope")
    missing_table = "no table 'ks.nope' in the cluster metadata: the tables are ks.pairs, ks.typed"
    for call in (
        lambda: endpoints_view(metadata, "ks", "nope", ["1:a"]),
        lambda: schema_view(metadata, "ks", "nope"),
    ):
        with pytest.raises(UnknownName) as raised:
            call()
        assert str(raised.value) == missing_table
    assert isinstance(raised.value, ValueError)


# ---------------------------------------------------------------------- status


def test_status_shows_liveness_beside_the_metadata_state() -> None:
    cluster, joining = joining_at_250(Step.START)
    a, b, c, d = (cluster.ids[name] for name in "ABCD")
    live = {
        a: {"up": True, "epoch": cluster.md.epoch, "load_bytes": 1024},
        b: {"up": False, "epoch": None, "load_bytes": None},
        joining: {"up": True, "epoch": cluster.md.epoch - 1, "load_bytes": 0},
    }  # c and d did not answer: down, nothing known
    view = status_view(cluster.md, live)
    assert view["epoch"] == cluster.md.epoch
    assert view["keyspaces"] == {
        "ks": {"replication": "SimpleStrategy(rf=2)", "replication_factor": 2}
    }
    rows = {row["id"]: row for row in view["nodes"]}
    assert [row["id"] for row in view["nodes"]] == [a, b, c, d, joining]
    assert {n: row["status"] for n, row in rows.items()} == {
        a: "UN",
        b: "DN",
        c: "DN",
        d: "DN",
        joining: "UJ",
    }
    assert rows[b]["state"] == "normal" and rows[b]["up"] is False
    assert rows[a] == {
        "id": a,
        "address": "A:7000",
        "datacenter": "dc1",
        "rack": "r1",
        "state": "normal",
        "up": True,
        "status": "UN",
        "epoch": cluster.md.epoch,
        "load_bytes": 1024,
        "tokens": 1,
        "ownership": {"ks": effective_ownership(cluster.md, "ks")[a]},
    }
    assert (rows[joining]["tokens"], rows[joining]["ownership"]) == (0, {"ks": 0.0})
    assert (rows[c]["epoch"], rows[c]["load_bytes"]) == (None, None)
    assert_plain_json(view)


def test_status_orders_nodes_by_datacenter_rack_and_id_with_numbers_as_numbers() -> None:
    cluster = Cluster({"nts": NTS}, datacenters={"A": "dc2"})
    for name in "ABCDEFGHIJKL":
        cluster.register(name)
    ids = [row["id"] for row in status_view(cluster.md, {})["nodes"]]
    assert ids == [f"node-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1)]
    assert status_view(cluster.md, {})["keyspaces"]["nts"]["replication_factor"] == 3


# ---------------------------------------------------------------------- schema and log


def test_the_schema_whole_and_filtered() -> None:
    cluster = with_tables(Cluster({"ks": RF2, "nts": NTS}))
    whole = schema_view(cluster.md)
    assert [k["name"] for k in whole["keyspaces"]] == ["ks", "nts"]
    assert [t["name"] for t in whole["keyspaces"][0]["tables"]] == ["pairs", "typed"]
    assert whole["keyspaces"][1]["replication"] == {
        "strategy": "NetworkTopologyStrategy",
        "factors": {"dc1": 2, "dc2": 1},
    }
    one_table = schema_view(cluster.md, "ks", "pairs")
    pairs = cluster.md.keyspaces["ks"].tables["pairs"]
    assert one_table == {
        "keyspaces": [
            {
                "name": "ks",
                "replication": {"strategy": "SimpleStrategy", "factors": {"replication_factor": 2}},
                "replication_type": "untracked",
                "options": {},
                "created_epoch": cluster.md.keyspaces["ks"].created_epoch,
                "tables": [
                    {
                        "name": "pairs",
                        "id": pairs.id,
                        "columns": [
                            {"name": "id", "type": "int"},
                            {"name": "name", "type": "text"},
                            {"name": "c", "type": "bigint"},
                            {"name": "v", "type": "text"},
                        ],
                        "partition_key": ["id", "name"],
                        "clustering_key": ["c"],
                        "options": {"gc_grace_seconds": "3600"},
                        "created_epoch": pairs.created_epoch,
                    }
                ],
            }
        ]
    }
    assert schema_view(cluster.md, "nts") == {"keyspaces": [whole["keyspaces"][1]]}
    with pytest.raises(ValueError, match="without its keyspace"):
        schema_view(cluster.md, table="pairs")
    assert_plain_json(whole)


def test_a_log_entry_as_a_line_and_as_json() -> None:
    join = PrepareJoin(node_id="node-5", tokens=(250,))
    decoded = LogRecord(epoch=12, entry_id="e-12", encoded=b"", transformation=join)
    assert log_line(decoded) == {
        "epoch": 12,
        "kind": "prepare_join",
        "entry_id": "e-12",
        "text": "PrepareJoin(node-5, tokens=[250])",
    }
    assert log_text(decoded) == "epoch 12   PrepareJoin(node-5, tokens=[250])"
    unknown = LogRecord(13, "", b"\x01", None, problem="unknown transformation kind 'x'")
    assert log_line(unknown) == {
        "epoch": 13,
        "kind": None,
        "entry_id": "",
        "text": "unknown transformation kind 'x'",
    }
    assert log_text(unknown) == "epoch 13   unknown transformation kind 'x'"


def test_every_view_of_a_busy_ring_is_plain_json() -> None:
    cluster = with_tables(Cluster({"ks": RF2, "nts": NTS}, datacenters={"D": "dc2", "E": "dc2"}))
    for name in "ABCD":
        join_allocated(cluster, name, num_tokens=4)
    join_allocated(cluster, "E", num_tokens=4, steps=(Step.START,))
    metadata = cluster.md
    assert_plain_json(status_view(metadata, {}))
    assert_plain_json(ring_view(metadata))
    assert_plain_json([effective_ownership(metadata, ks) for ks in ("ks", "nts")])
    assert_plain_json([placements_view(metadata, ks) for ks in ("ks", "nts")])
    assert all(r["token"] < RING_SIZE for r in ring_view(metadata))
