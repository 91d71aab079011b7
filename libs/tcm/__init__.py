"""Cluster metadata: epochs, the immutable ClusterMetadata, and its transformations. Pure."""

from epochal.tcm.directory import NodeInfo, NodeState
from epochal.tcm.errors import Rejected
from epochal.tcm.metadata import EMPTY_EPOCH, ClusterMetadata, CMSMember, Epoch
from epochal.tcm.placement import Placement, RangeDelta
from epochal.tcm.replication import TokenMap, natural_groups
from epochal.tcm.schema import (
    Column,
    ColumnType,
    Keyspace,
    ReplicationParams,
    ReplicationType,
    Strategy,
    Table,
)
from epochal.tcm.sequences import InProgressSequence, RangeLocked, SequenceKind, Step
from epochal.tcm.tokens import MAX_TOKEN, MIN_TOKEN, TokenRange, token_of
from epochal.tcm.topology import (
    TOPOLOGY_KINDS,
    AdvanceSequence,
    CancelSequence,
    PrepareJoin,
    PrepareLeave,
    PrepareMove,
    PrepareReplace,
)
from epochal.tcm.transformations import (
    BASE_KINDS,
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

ALL_KINDS = BASE_KINDS + TOPOLOGY_KINDS

__all__ = [
    "ALL_KINDS",
    "EMPTY_EPOCH",
    "MAX_TOKEN",
    "MIN_TOKEN",
    "AdvanceSequence",
    "AlterKeyspace",
    "AlterTable",
    "CMSMember",
    "CancelSequence",
    "ClusterMetadata",
    "Column",
    "ColumnType",
    "CreateKeyspace",
    "CreateTable",
    "DropKeyspace",
    "DropTable",
    "Epoch",
    "InProgressSequence",
    "InitializeCMS",
    "Keyspace",
    "NodeInfo",
    "NodeState",
    "Placement",
    "PrepareJoin",
    "PrepareLeave",
    "PrepareMove",
    "PrepareReplace",
    "RangeDelta",
    "RangeLocked",
    "Register",
    "Rejected",
    "ReplicationParams",
    "ReplicationType",
    "SequenceKind",
    "Step",
    "Strategy",
    "Table",
    "TokenMap",
    "TokenRange",
    "Transformation",
    "TriggerSnapshot",
    "Unregister",
    "apply_transformation",
    "natural_groups",
    "token_of",
]
