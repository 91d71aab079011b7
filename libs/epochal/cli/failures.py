"""What a command that could not do its job raises: one line for the operator, and the exit code.

* ``Refused`` (exit 1): the cluster answered no — an operation refused or failed, an unknown
  keyspace, table or node, a process that is not the kind the command needs.
* ``Unreachable`` (exit 2): nothing to ask — no process answered at the addresses given.
* ``WrongKind`` (exit 2): the address reaches another kind of process than the command needs
  ("127.0.0.1:7002 is a CMS member, not a replica").

Usage errors (a bad flag, a missing argument) are click's, exit 2 as well.
"""

from __future__ import annotations

REFUSED_EXIT = 1
USAGE_EXIT = 2


class Failure(Exception):
    exit_code = REFUSED_EXIT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Refused(Failure):
    exit_code = REFUSED_EXIT


class Unreachable(Failure):
    exit_code = USAGE_EXIT


class WrongKind(Failure):
    exit_code = USAGE_EXIT
