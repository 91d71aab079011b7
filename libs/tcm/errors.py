"""Why a transformation was refused: a named rule and a sentence a person can act on."""

from __future__ import annotations


class Rejected(Exception):
    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rejected) and (self.rule, self.message) == (
            other.rule,
            other.message,
        )

    def __hash__(self) -> int:
        return hash((self.rule, self.message))
