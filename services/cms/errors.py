"""The CMS's expected failures of a commit, each carrying the gRPC status it maps to."""

from __future__ import annotations


class CommitError(Exception):
    code = "UNAVAILABLE"
    rule = ""

    def __init__(self, message: str, *, rule: str = "") -> None:
        super().__init__(message)
        self.message = message
        if rule:
            self.rule = rule


class InvalidCommit(CommitError):
    code = "INVALID_ARGUMENT"


class RejectedCommit(CommitError):
    """The transformation broke a rule of the metadata model (or reused an entry id)."""

    code = "FAILED_PRECONDITION"


class NotLeaderError(CommitError):
    code = "UNAVAILABLE"

    def __init__(self, leader_id: str | None) -> None:
        self.leader_id = leader_id
        super().__init__(
            f"this CMS member is not the leader (leader: {leader_id or 'none elected yet'}); "
            "retry with the same entry_id"
        )


class OverloadedError(CommitError):
    code = "RESOURCE_EXHAUSTED"


class CommitTimeout(CommitError):
    code = "UNAVAILABLE"


class ShuttingDown(CommitError):
    """This member is stopping: the commit goes to another member, with the same entry id."""

    code = "UNAVAILABLE"
    rule = "shutting_down"


def entry_id_reused(entry_id: str, epoch: int) -> RejectedCommit:
    return RejectedCommit(
        f"entry_id {entry_id!r} was already used for a different transformation "
        f"(committed at epoch {epoch}); use a new entry_id for a new transformation",
        rule="entry_id_reused",
    )
