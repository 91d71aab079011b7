"""This node's identity: its node id, its register entry id, the HLC ceiling reserved ahead of
the clock, and the coordinator logs with their reserved sequence ceilings — every write durable
whatever ``--sync`` says (an id issued above a ceiling a power loss forgot would be issued
again)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from epochal.replica.database import ReplicaDatabase
from epochal.runtime.database import transaction


@dataclass(frozen=True, slots=True)
class NodeStateRow:
    node_id: str
    register_entry_id: str
    hlc_ceiling: int


@dataclass(frozen=True, slots=True)
class LogRow:
    log: int
    keyspace: str
    keyspace_epoch: int
    range_left: int
    range_right: int
    opened_epoch: int
    sealed: bool
    sequence_ceiling: int


class IdentityStore:
    def __init__(self, db: ReplicaDatabase) -> None:
        self._db = db

    def node_state(self) -> NodeStateRow:
        row = self._db.query_one("SELECT node_id, register_entry_id, hlc_ceiling FROM node_state")
        return NodeStateRow(*row)

    def set_register_entry_id(self, entry_id: str) -> None:
        self._db.execute_durable("UPDATE node_state SET register_entry_id = ?", (entry_id,))

    def set_node_id(self, node_id: str) -> None:
        self._db.execute_durable("UPDATE node_state SET node_id = ?", (node_id,))

    def set_hlc_ceiling(self, ceiling: int) -> None:
        self._db.execute_durable("UPDATE node_state SET hlc_ceiling = ?", (ceiling,))

    # ------------------------------------------------------------------ coordinator logs

    def coordinator_logs(self) -> list[LogRow]:
        rows = self._db.query(
            "SELECT log, keyspace, keyspace_epoch, range_left, range_right, opened_epoch, "
            "sealed, sequence_ceiling FROM coordinator_logs ORDER BY log"
        )
        return [LogRow(*row[:6], bool(row[6]), row[7]) for row in rows]

    def open_log(self, row: LogRow, seal: Sequence[int]) -> None:
        """Durably record a new log (and seal the logs it replaces) before its first id."""
        with transaction(self._db.durable_raw) as cursor:
            cursor.executemany(
                "UPDATE coordinator_logs SET sealed = 1 WHERE log = ?", [(s,) for s in seal]
            )
            cursor.execute(
                "INSERT INTO coordinator_logs (log, keyspace, keyspace_epoch, range_left, "
                "range_right, opened_epoch, sealed, sequence_ceiling) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.log,
                    row.keyspace,
                    row.keyspace_epoch,
                    row.range_left,
                    row.range_right,
                    row.opened_epoch,
                    row.sealed,
                    row.sequence_ceiling,
                ),
            )

    def set_sequence_ceiling(self, log: int, ceiling: int) -> None:
        self._db.execute_durable(
            "UPDATE coordinator_logs SET sequence_ceiling = ? WHERE log = ?", (ceiling, log)
        )
