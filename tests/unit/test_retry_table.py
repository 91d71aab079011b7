"""The retry table (epochal.status.RETRIES): the README's copy is the code's, and it keeps its
rules — a status that means "the server decided no" is never retried, a commit keeps its entry
id, and every status a client can see when a server dies mid-call is retried."""

from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest

from epochal.status import RETRIES, Operation, Retry, retry_for

README = Path(__file__).resolve().parents[2] / "README.md"
CELLS = {"same id": Retry.SAME, "fresh id": Retry.FRESH, "retry": Retry.SAME, "no": Retry.NO}
COLUMNS = (Operation.COMMIT, Operation.WRITE, Operation.READ)
DECIDED_NO = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.DATA_LOSS,
}
# What a client sees when the server it called dies or stops mid-call.
SERVER_GONE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}


def readme_table() -> dict[grpc.StatusCode, tuple[Retry, ...]]:
    section = README.read_text().split("## Errors and retries", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", section, re.M)
    return {
        grpc.StatusCode[name]: tuple(CELLS[cell.strip()] for cell in cells) for name, *cells in rows
    }


def test_the_readme_shows_the_table_the_clients_follow() -> None:
    assert readme_table() == RETRIES


@pytest.mark.parametrize("code", sorted(DECIDED_NO, key=lambda c: c.name))
def test_a_refusal_is_never_retried(code: grpc.StatusCode) -> None:
    assert all(retry_for(operation, code) is Retry.NO for operation in Operation)


@pytest.mark.parametrize("code", sorted(SERVER_GONE, key=lambda c: c.name))
def test_an_attempt_cut_short_is_retried_with_its_id(code: grpc.StatusCode) -> None:
    assert all(retry_for(operation, code) is Retry.SAME for operation in Operation)


def test_only_a_write_ever_takes_a_fresh_id() -> None:
    for code, row in RETRIES.items():
        for operation, retry in zip(COLUMNS, row, strict=True):
            if retry is Retry.FRESH:
                assert operation is Operation.WRITE, code


def test_a_failure_without_a_status_is_not_retried() -> None:
    assert retry_for(Operation.READ, None) is Retry.NO
    assert retry_for(Operation.COMMIT, grpc.StatusCode.OK) is Retry.NO
