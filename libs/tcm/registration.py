"""Directory transformations: a node registers (its location and software version) and a node
that never joined unregisters. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.directory import NodeInfo, NodeState, parse_version
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.schema import (
    frozen_map,
)
from epochal.tcm.transformations import Transformation

# --------------------------------------------------------------------------- directory

# The oldest software version that can apply every kind of transformation of this log format:
# a node that registers with an older one would block every kind it cannot apply.
OLDEST_VERSION = "1.0.0"
_VERSION_PART_DIGITS = 6


def check_version(version: str) -> None:
    """A registering node's version: MAJOR.MINOR.PATCH, no older than ``OLDEST_VERSION``
    (raises Rejected)."""
    parts = version.split(".")
    if len(parts) != 3 or not all(
        p.isascii() and p.isdigit() and len(p) <= _VERSION_PART_DIGITS for p in parts
    ):
        raise Rejected(
            "bad_version",
            f"version {version[:40]!r} is not MAJOR.MINOR.PATCH (numbers of at most "
            f"{_VERSION_PART_DIGITS} digits), e.g. {OLDEST_VERSION}",
        )
    if parse_version(version) < parse_version(OLDEST_VERSION):
        raise Rejected(
            "version_too_old",
            f"version {version} is older than {OLDEST_VERSION}, the oldest that can apply "
            "every transformation of this log; upgrade the node before it registers",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Register(Transformation):
    """Adds a node; its id is ``node-<n>`` from a counter in the metadata."""

    address: str
    datacenter: str
    rack: str
    version: str
    kind: ClassVar[str] = "register"

    def check_input(self) -> None:
        check_version(self.version)

    def check(self, metadata: ClusterMetadata) -> None:
        for what, value in (
            ("address", self.address),
            ("datacenter", self.datacenter),
            ("rack", self.rack),
        ):
            if not value or len(value) > 256:
                raise Rejected("bad_node", f"{what} must be 1..256 characters")
        try:
            parse_version(self.version)
        except ValueError as error:
            raise Rejected("bad_node", str(error)) from None
        for node in metadata.nodes.values():
            if node.address == self.address and node.state is not NodeState.LEFT:
                raise Rejected(
                    "address_in_use",
                    f"{self.address} is already registered as {node.node_id} "
                    f"({node.state.value}); unregister it first",
                )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        node_id = f"node-{metadata.next_node_number}"
        node = NodeInfo(
            node_id=node_id,
            address=self.address,
            datacenter=self.datacenter,
            rack=self.rack,
            state=NodeState.REGISTERED,
            version=self.version,
            registered_epoch=epoch,
        )
        return replace(
            metadata,
            nodes=frozen_map({**metadata.nodes, node_id: node}),
            next_node_number=metadata.next_node_number + 1,
        )

    def __str__(self) -> str:
        return f"Register({self.address}, {self.datacenter}/{self.rack}, v{self.version})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Unregister(Transformation):
    node_id: str
    kind: ClassVar[str] = "unregister"

    def check(self, metadata: ClusterMetadata) -> None:
        node = metadata.nodes.get(self.node_id)
        if node is None:
            raise Rejected("node_not_found", f"no node {self.node_id!r} is registered")
        if node.state not in (NodeState.REGISTERED, NodeState.LEFT):
            raise Rejected(
                "node_in_use",
                f"{self.node_id} is {node.state.value}; only a registered or left node can be "
                "unregistered",
            )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        nodes = {k: v for k, v in metadata.nodes.items() if k != self.node_id}
        return replace(metadata, nodes=frozen_map(nodes))

    def __str__(self) -> str:
        return f"Unregister({self.node_id})"
