"""Shared fixtures: PostgreSQL on 127.0.0.1:5432 (skipped with a reason, or failed under CI);
a local Spark session for the analytics job's tests (one per run: starting one costs seconds);
the run's certificates (every local cluster runs with mutual TLS; the harness calls it with a
certificate of every role, the SDK and the CLI with an operator's, named by EPOCHAL_TLS_*)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from epochal.devcluster.pki import TLS_ENV, DevPki, use_pki
from epochal.wire.roles import OPERATOR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session", autouse=True)
def cluster_pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevPki]:
    pki = DevPki(tmp_path_factory.mktemp("pki"))
    use_pki(pki)  # the harness's own calls: a certificate of every role (it drives them all)
    before = {name: os.environ.get(name) for name in TLS_ENV}
    operator = pki.files("tests-operator", (OPERATOR,))  # the SDK's and the CLI's: an operator's
    os.environ.update(zip(TLS_ENV, (operator.ca, operator.cert, operator.key), strict=True))
    yield pki
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("EPOCHAL_TEST_PG_URL", DEFAULT_PG_URL)
    try:
        engine = sa.create_engine(url)
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as error:
        reason = f"PostgreSQL not reachable at {url}: {type(error).__name__}: {error}"
        if _under_ci():
            pytest.fail(f"{reason} (under CI a skip is a failure)")
        pytest.skip(reason)
    return url


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[Callable[[], str]]:
    """Make unique schemas; every one is dropped at teardown, even if the test failed."""
    made: list[str] = []

    def make() -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield make
    engine = sa.create_engine(postgres_url)
    with engine.begin() as connection:
        for name in made:
            connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def storage_backend(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str | None]:
    """(url, schema) of a fresh database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/db/cms.db", None
    url = request.getfixturevalue("postgres_url")
    return url, request.getfixturevalue("pg_schema")()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The analytics job's own session (``epochal.analytics.job.session``) on local[2]."""
    from epochal.analytics.job import JobSettings, session

    out = tmp_path_factory.mktemp("analytics")
    settings = JobSettings(traces=("-",), out=str(out), master="local[2]", shuffle_partitions=2)
    spark = session(settings)
    yield spark
    spark.stop()
