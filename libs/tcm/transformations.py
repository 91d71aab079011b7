"""Transformations: each validates against a state and executes into the next epoch. Pure.

Theory of operation
-------------------
``validate(md)`` returns ``None`` or the ``Rejected`` rule it breaks; ``execute(md)`` (only after
a successful validate) returns a new ``ClusterMetadata`` at ``md.epoch + 1``. The CMS validates
every transformation against the state at the tail of the log before appending it, so racing
changes cannot both pass: the second validates against the first (seed 000's DROP TYPE /
CREATE TABLE race). Everything an execute assigns — table ids, node ids — is derived from the
state and the epoch, so every member computes the same result.

Common rules: nothing but InitializeCMS before the CMS is initialised; no kind that some
registered node's software version cannot apply (DESIGN.md "The metadata model").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.directory import NodeState, parse_version
from epochal.tcm.metadata import ClusterMetadata, CMSMember, CMSRole


class Transformation:
    kind: ClassVar[str] = ""
    since_version: ClassVar[str] = "1.0.0"
    needs_initialized: ClassVar[bool] = True

    def validate(self, metadata: ClusterMetadata) -> Rejected | None:
        try:
            self._check_common(metadata)
            self.check(metadata)
        except Rejected as rejection:
            return rejection
        return None

    def check_input(self) -> None:
        """What is wrong with the transformation whatever the metadata (raises Rejected),
        checked where a commit arrives (the CMS answers INVALID_ARGUMENT) and never when a
        chosen entry is applied: members of different versions apply the log alike, so a rule
        added here binds new commits only."""

    def execute(self, metadata: ClusterMetadata) -> ClusterMetadata:
        return replace(self.change(metadata, metadata.epoch + 1), epoch=metadata.epoch + 1)

    def check(self, metadata: ClusterMetadata) -> None:
        raise NotImplementedError

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        raise NotImplementedError

    def _check_common(self, metadata: ClusterMetadata) -> None:
        if self.needs_initialized and not metadata.initialized:
            raise Rejected(
                "not_initialized", f"{self.kind} before InitializeCMS: the log is not initialised"
            )
        needed = parse_version(self.since_version)
        for node in metadata.nodes.values():
            if node.state is not NodeState.LEFT and parse_version(node.version) < needed:
                way_out = (
                    f"; or, since it never joined, unregister it (epochal unregister "
                    f"{node.node_id})"
                    if node.state is NodeState.REGISTERED
                    else ""
                )
                raise Rejected(
                    "version_too_old",
                    f"node {node.node_id} runs version {node.version}, which cannot apply "
                    f"{self.kind} (needs {self.since_version}); upgrade it first{way_out}",
                )


def apply_transformation(
    metadata: ClusterMetadata, transformation: Transformation
) -> ClusterMetadata:
    """Validate then execute; raises the ``Rejected`` it breaks."""
    rejection = transformation.validate(metadata)
    if rejection is not None:
        raise rejection
    return transformation.execute(metadata)


# --------------------------------------------------------------------------- CMS and snapshots


@dataclass(frozen=True, slots=True, kw_only=True)
class InitializeCMS(Transformation):
    members: tuple[CMSMember, ...]
    kind: ClassVar[str] = "initialize_cms"
    needs_initialized: ClassVar[bool] = False

    def check(self, metadata: ClusterMetadata) -> None:
        if metadata.initialized:
            raise Rejected("already_initialized", "the CMS was initialised at epoch 1 already")
        if not self.members:
            raise Rejected("bad_members", "InitializeCMS needs at least one member")
        ids = [m.member_id for m in self.members]
        if len(set(ids)) != len(ids) or not all(ids) or not all(m.address for m in self.members):
            raise Rejected("bad_members", f"member ids must be unique and non-empty: {ids}")

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        voters = (replace(m, role=CMSRole.VOTER) for m in self.members)
        return replace(metadata, cms_members=tuple(sorted(voters, key=lambda m: m.member_id)))

    def __str__(self) -> str:
        return "InitializeCMS(" + ", ".join(m.member_id for m in self.members) + ")"


@dataclass(frozen=True, slots=True)
class TriggerSnapshot(Transformation):
    kind: ClassVar[str] = "trigger_snapshot"

    def check(self, metadata: ClusterMetadata) -> None:
        return None

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        return metadata

    def __str__(self) -> str:
        return "TriggerSnapshot"
