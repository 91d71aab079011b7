"""Cluster metadata: epochs, the immutable ClusterMetadata, and its transformations. Pure."""

from epochal.errors import Rejected
from epochal.tcm.cms import (
    CMS_KINDS,
    AddCMSCandidate,
    FinishAddToCMS,
    RemoveFromCMS,
    StartAddToCMS,
    next_reconfiguration,
    target_voters,
)
from epochal.tcm.directory import NodeInfo, NodeState
from epochal.tcm.leases import GrantReconcileLease, LeaseChanged, LeaseGrant
from epochal.tcm.metadata import EMPTY_EPOCH, ClusterMetadata, CMSMember, CMSRole, Epoch
from epochal.tcm.placement import Placement, RangeDelta
from epochal.tcm.reconcilers import RegisterReconciler
from epochal.tcm.registration import Register, Unregister
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
from epochal.tcm.schema_changes import (
    AlterKeyspace,
    AlterTable,
    CreateKeyspace,
    CreateTable,
    DropKeyspace,
    DropTable,
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
    InitializeCMS,
    Transformation,
    TriggerSnapshot,
    apply_transformation,
)

BASE_KINDS: tuple[type[Transformation], ...] = (
    InitializeCMS,
    CreateKeyspace,
    AlterKeyspace,
    DropKeyspace,
    CreateTable,
    AlterTable,
    DropTable,
    Register,
    Unregister,
    TriggerSnapshot,
    GrantReconcileLease,
    RegisterReconciler,
)
ALL_KINDS = BASE_KINDS + TOPOLOGY_KINDS + CMS_KINDS

__all__ = [
    "ALL_KINDS",
    "CMS_KINDS",
    "EMPTY_EPOCH",
    "MAX_TOKEN",
    "MIN_TOKEN",
    "AddCMSCandidate",
    "AdvanceSequence",
    "AlterKeyspace",
    "AlterTable",
    "CMSMember",
    "CMSRole",
    "CancelSequence",
    "ClusterMetadata",
    "Column",
    "ColumnType",
    "CreateKeyspace",
    "CreateTable",
    "DropKeyspace",
    "DropTable",
    "Epoch",
    "FinishAddToCMS",
    "GrantReconcileLease",
    "InProgressSequence",
    "InitializeCMS",
    "Keyspace",
    "LeaseChanged",
    "LeaseGrant",
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
    "RegisterReconciler",
    "Rejected",
    "RemoveFromCMS",
    "ReplicationParams",
    "ReplicationType",
    "SequenceKind",
    "StartAddToCMS",
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
    "next_reconfiguration",
    "target_voters",
    "token_of",
]
