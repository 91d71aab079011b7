"""Storage format 2 (Cassandra's tokens): a data directory of format 1 is refused at start, before
Alembic could upgrade it and its tokens be misread; a new one is created at the newest format.

Format 1 is a database migrated to revision 0002 with Alembic's own API, as a replica of that
version left it; the last test starts the real replica process on such a directory."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from epochal.replica.database import MIGRATIONS, StorageFormatError
from epochal.replica.server import EXIT_STORAGE_FORMAT
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.processes import free_ports

START_TIMEOUT_S = 30.0


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def format_1_database(path: Path) -> None:
    """A replica database as the last format-1 revision (0002) left it, holding one cell."""
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{path}")
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
        connection.exec_driver_sql(
            "INSERT INTO cells VALUES ('t1', -1857488013337454082, x'01757365722d343200', x'',"
            " '*', NULL, 1, x'00', 0)"
        )
    engine.dispose()


def revision_of(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_a_format_1_database_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "replica.db"
    format_1_database(path)
    with pytest.raises(StorageFormatError) as raised:
        ReplicaStorage(f"sqlite:///{path}")
    message = str(raised.value)
    assert f"{path} was written by an older replica (storage revision 0002)" in message
    assert "tokens are not Cassandra's; there is no conversion" in message
    assert "Start the replica with an empty --data-dir" in message
    assert revision_of(path) == "0002"  # not migrated
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM cells").fetchone() == (1,)


def test_a_new_database_is_created_at_the_newest_format_and_reopens(tmp_path):
    path = tmp_path / "data" / "replica.db"
    storage = ReplicaStorage(f"sqlite:///{path}")
    storage.close()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision_of(path) == head
    ReplicaStorage(f"sqlite:///{path}").close()


def replica_process(data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    listen, cms = free_ports(2)
    with log.open("wb") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "epochal.replica",
                "--listen",
                f"127.0.0.1:{listen}",
                "--cms",
                f"127.0.0.1:{cms}",  # nothing listens: the replica serves, retries registering
                "--data-dir",
                str(data_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def test_the_replica_process_refuses_a_format_1_data_dir_and_starts_on_an_empty_one(tmp_path):
    old = tmp_path / "old"
    format_1_database(old / "replica.db")
    refused = replica_process(old, tmp_path / "old.log")
    assert refused.wait(timeout=START_TIMEOUT_S) == EXIT_STORAGE_FORMAT
    stderr = (tmp_path / "old.log").read_text()
    assert "CRITICAL" in stderr and "there is no conversion" in stderr, stderr
    assert "Traceback" not in stderr, stderr

    fresh = replica_process(tmp_path / "new", tmp_path / "new.log")
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "replica listening on" not in (tmp_path / "new.log").read_text():
            assert fresh.poll() is None, (tmp_path / "new.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "new.log").read_text()
            time.sleep(0.05)
    finally:
        fresh.send_signal(signal.SIGTERM)
        fresh.wait(timeout=START_TIMEOUT_S)
