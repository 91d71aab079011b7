"""Cluster metadata: epochs, the immutable ClusterMetadata, and its transformations. Pure."""

from epochal.tcm.directory import NodeInfo, NodeState
from epochal.tcm.errors import Rejected
from epochal.tcm.metadata import EMPTY_EPOCH, ClusterMetadata, CMSMember, Epoch
from epochal.tcm.schema import (
    Column,
    ColumnType,
    Keyspace,
    ReplicationParams,
    ReplicationType,
    Strategy,
    Table,
)
from epochal.tcm.transformations import (
    ALL_KINDS,
    AlterKeyspace,
    AlterTable,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
    InitializeCMS,
    Register,
    Transformation,
    TriggerSnapshot,
    Unregister,
    apply_transformation,
)

__all__ = [
    "ALL_KINDS",
    "EMPTY_EPOCH",
    "AlterKeyspace",
    "AlterTable",
    "CMSMember",
    "ClusterMetadata",
    "Column",
    "ColumnType",
    "CreateKeyspace",
    "CreateTable",
    "DropKeyspace",
    "DropTable",
    "Epoch",
    "InitializeCMS",
    "Keyspace",
    "NodeInfo",
    "NodeState",
    "Register",
    "Rejected",
    "ReplicationParams",
    "ReplicationType",
    "Strategy",
    "Table",
    "Transformation",
    "TriggerSnapshot",
    "Unregister",
    "apply_transformation",
]
