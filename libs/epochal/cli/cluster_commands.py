"""The cluster at a glance: ``status``, ``ring``, ``describe``, ``placements``, ``endpoints``,
``health``. Each reads the metadata (``epochal.cli.connect``), asks the processes what only they
know (their applied epoch, load, health) at once, and prints the shape ``epochal.views`` builds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import click

from epochal import views
from epochal.cli.connect import CMS, RECONCILER, REPLICA, Cluster
from epochal.cli.failures import Failure, Refused
from epochal.cli.options import Options, global_options
from epochal.cli.output import emit, percent, size, table
from epochal.cli.runner import opened, run

HEALTHY = "SERVING"


# ---------------------------------------------------------------------- status


@click.command()
@global_options
def status() -> int:
    """Every node: datacenter, rack, state, applied epoch, load, tokens, ownership."""
    return run(_status)


async def _status(options: Options) -> int:
    async with opened(options) as cluster:
        data = views.status_view(cluster.metadata, await _liveness(cluster))
    emit(options.output, data, lambda: status_tables(data))
    return 0


async def _liveness(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """What each node says of itself (up, applied epoch, load); a node that does not answer is
    down."""
    nodes = cluster.live_nodes()
    answers = await asyncio.gather(
        *(cluster.describe_replica(n.address) for n in nodes), return_exceptions=True
    )
    live: dict[str, dict[str, Any]] = {}
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, Failure):  # it did not answer in time
            live[node.node_id] = {"up": False, "epoch": None, "load_bytes": None}
        elif isinstance(answer, BaseException):
            raise answer
        else:
            live[node.node_id] = {
                "up": True,
                "epoch": answer.epoch,
                "load_bytes": answer.load_bytes,
            }
    return live


def status_tables(data: dict[str, Any]) -> list[Any]:
    keyspaces = list(data["keyspaces"])
    shown: list[Any] = [f"Epoch: {data['epoch']}"]
    by_dc: dict[str, list[dict[str, Any]]] = {}
    for node in data["nodes"]:
        by_dc.setdefault(node["datacenter"], []).append(node)
    columns = ["--", "ID", "ADDRESS", "> LOAD", "> TOKENS"]
    columns += [f"> OWNS ({ks})" for ks in keyspaces]
    columns += ["> EPOCH", "RACK"]
    for dc, nodes in by_dc.items():
        rows = [
            [
                n["status"],
                n["id"],
                n["address"],
                size(n["load_bytes"]) if n["up"] else "?",
                n["tokens"],
                *(percent(n["ownership"].get(ks, 0.0)) for ks in keyspaces),
                n["epoch"] if n["epoch"] is not None else "?",
                n["rack"],
            ]
            for n in nodes
        ]
        shown.append(
            f"Datacenter: {dc}\nStatus=Up/Down  State=Normal/Joining/Leaving/Moving/Registered"
        )
        shown.append(table(columns, rows))
    if keyspaces:
        factors = ", ".join(
            f"{ks} {info['replication_factor']} ({info['replication']})"
            for ks, info in data["keyspaces"].items()
        )
        shown.append(f"OWNS: effective ownership, summing to RF x 100% per keyspace: {factors}")
    return shown


# ---------------------------------------------------------------------- ring


@click.command()
@global_options
def ring() -> int:
    """Every token and the node that owns it (pending: a join in flight)."""
    return run(_ring)


async def _ring(options: Options) -> int:
    async with opened(options) as cluster:
        rows = views.ring_view(cluster.metadata)
        epoch = cluster.metadata.epoch
    data = {"epoch": epoch, "tokens": rows}
    emit(
        options.output,
        data,
        lambda: [
            table(
                ["> TOKEN", "NODE", "ADDRESS", "DC", "RACK", "STATE", "PENDING"],
                [
                    [
                        r["token"],
                        r["node"],
                        r["address"],
                        r["datacenter"],
                        r["rack"],
                        r["state"],
                        "yes" if r["pending"] else "",
                    ]
                    for r in rows
                ],
            )
        ],
    )
    return 0


# ---------------------------------------------------------------------- describe


@click.command()
@click.argument("name", required=False, metavar="[KEYSPACE[.TABLE]]")
@global_options
def describe(name: str | None) -> int:
    """The schema: every keyspace, one keyspace, or one table."""
    keyspace, _, table_name = (name or "").partition(".")
    return run(lambda options: _describe(options, keyspace or None, table_name or None))


async def _describe(options: Options, keyspace: str | None, table_name: str | None) -> int:
    async with opened(options) as cluster:
        try:
            data = views.schema_view(cluster.metadata, keyspace, table_name)
        except views.UnknownName as error:
            raise Refused(str(error)) from None
        data = {"epoch": cluster.metadata.epoch, **data}
    emit(options.output, data, lambda: schema_tables(data, table_name is not None))
    return 0


def schema_tables(data: dict[str, Any], one_table: bool) -> list[Any]:
    shown: list[Any] = []
    for ks in data["keyspaces"]:
        factors = ", ".join(f"{k}={v}" for k, v in ks["replication"]["factors"].items())
        shown.append(
            f"keyspace {ks['name']}: {ks['replication']['strategy']} ({factors}), "
            f"{ks['replication_type']}, created at epoch {ks['created_epoch']}"
        )
        if one_table:
            for t in ks["tables"]:
                keys = set(t["partition_key"]) | set(t["clustering_key"])
                shown.append(
                    table(
                        ["COLUMN", "TYPE", "KEY"],
                        [
                            [
                                c["name"],
                                c["type"],
                                "partition"
                                if c["name"] in t["partition_key"]
                                else "clustering"
                                if c["name"] in keys
                                else "",
                            ]
                            for c in t["columns"]
                        ],
                        title=f"table {ks['name']}.{t['name']} (id {t['id']})",
                    )
                )
        elif ks["tables"]:
            shown.append(
                table(
                    ["TABLE", "PARTITION KEY", "CLUSTERING KEY", "COLUMNS", "> CREATED"],
                    [
                        [
                            t["name"],
                            ", ".join(t["partition_key"]),
                            ", ".join(t["clustering_key"]),
                            ", ".join(f"{c['name']} {c['type']}" for c in t["columns"]),
                            t["created_epoch"],
                        ]
                        for t in ks["tables"]
                    ],
                )
            )
    return shown or ["no keyspaces"]


# ---------------------------------------------------------------------- placements


@click.command()
@click.argument("keyspace")
@global_options
def placements(keyspace: str) -> int:
    """The read and write groups of every range of KEYSPACE (pending replicas marked)."""
    return run(lambda options: _placements(options, keyspace))


async def _placements(options: Options, keyspace: str) -> int:
    async with opened(options) as cluster:
        try:
            data = views.placements_view(cluster.metadata, keyspace)
        except views.UnknownName as error:
            raise Refused(str(error)) from None
    emit(
        options.output,
        data,
        lambda: [
            f"keyspace {data['keyspace']} ({data['replication']}) at epoch {data['epoch']}",
            table(
                ["RANGE", "READS", "WRITES", "PENDING", "LEAVING"],
                [
                    [
                        f"({r['left']}, {r['right']}]",
                        ",".join(r["reads"]),
                        ",".join(r["writes"]),
                        ",".join(r["pending"]),
                        ",".join(r["leaving"]),
                    ]
                    for r in data["ranges"]
                ],
            ),
        ],
    )
    return 0


# ---------------------------------------------------------------------- endpoints


@click.command()
@click.argument("keyspace")
@click.argument("table_name", metavar="TABLE")
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@global_options
def endpoints(keyspace: str, table_name: str, keys: Sequence[str]) -> int:
    """The replicas of each partition KEY: a composite key is its parts joined by ':' (only
    the last part may hold a ':'); a key that starts with '-' goes after '--'
    (epochal endpoints ks t -- -5)."""
    return run(lambda options: _endpoints(options, keyspace, table_name, keys))


async def _endpoints(options: Options, keyspace: str, table_name: str, keys: Sequence[str]) -> int:
    async with opened(options) as cluster:
        try:
            rows = views.endpoints_view(cluster.metadata, keyspace, table_name, keys)
        except (views.UnknownName, views.BadKey) as error:
            raise Refused(str(error)) from None
        data = {"epoch": cluster.metadata.epoch, "keyspace": keyspace, "table": table_name}
    data["keys"] = rows
    emit(
        options.output,
        data,
        lambda: [
            table(
                ["KEY", "> TOKEN", "REPLICAS", "PENDING"],
                [
                    [r["key"], r["token"], ", ".join(r["replicas"]), ",".join(r["pending"])]
                    for r in rows
                ],
            )
        ],
    )
    return 0


# ---------------------------------------------------------------------- health


@click.command()
@global_options
def health() -> int:
    """The gRPC health of every process; exit code 0 only if every one serves."""
    return run(_health)


async def _health(options: Options) -> int:
    async with opened(options) as cluster:
        processes = processes_of(cluster)
        answers = await asyncio.gather(*(cluster.health(address) for _, _, address in processes))
    rows = [
        {"kind": kind, "name": name, "address": address, "health": answer}
        for (kind, name, address), answer in zip(processes, answers, strict=True)
    ]
    healthy = all(r["health"] == HEALTHY for r in rows)
    data = {"healthy": healthy, "processes": rows}
    emit(
        options.output,
        data,
        lambda: [
            table(
                ["KIND", "NAME", "ADDRESS", "HEALTH"],
                [[r["kind"], r["name"], r["address"], r["health"]] for r in rows],
            ),
            "every process serves"
            if healthy
            else f"{sum(r['health'] != HEALTHY for r in rows)} of {len(rows)} do not serve",
        ],
    )
    return 0 if healthy else 1


def processes_of(cluster: Cluster) -> list[tuple[str, str, str]]:
    """(kind, name, address) of every process the metadata names: CMS members, replicas that
    have not left, reconcilers."""
    return [
        *((CMS, m.member_id, m.address) for m in cluster.metadata.cms_members),
        *((REPLICA, n.node_id, n.address) for n in cluster.live_nodes()),
        *((RECONCILER, rid, address) for rid, address in cluster.reconcilers().items()),
    ]
