"""The names of every span, span attribute, event and resource attribute the project writes.

This module imports nothing, so the analytics job (``epochal.analytics``) can ship it to Spark
executors alone and read the spans by the very names the services wrote them with. A span's
name is ``<service>.<work>``; attribute names are ``epochal.<what>``, beside the OpenTelemetry
semantic conventions' own where one fits (``rpc.grpc.status_code``, ``service.*``).
"""

from __future__ import annotations

# --------------------------------------------------------------------------- resource
SERVICE_NAME = "service.name"  # "cms", "replica", "reconciler", or the application's name
SERVICE_INSTANCE = "service.instance.id"  # member id; a replica's, a reconciler's host_port
SERVICE_VERSION = "service.version"  # the epochal package's version
# The process's id in the cluster: member id, node id, reconciler id (a replica's first start,
# before it has registered, gives its instance id).
NODE_ID = "epochal.node.id"
DATACENTER = "epochal.datacenter"
RACK = "epochal.rack"

# --------------------------------------------------------------------------- spans
# The SDK (kind CLIENT): one span per call, one child per attempt.
CLIENT_CALL_PREFIX = "client."  # + the method: client.write, client.read, client.create_table
CLIENT_ATTEMPT = "client.attempt"
# A replica coordinating (kind SERVER): the client's call as this coordinator served it.
REPLICA_WRITE = "replica.write"
REPLICA_READ = "replica.read"
# A replica serving one request of a coordinator (kind SERVER), itself included.
REPLICA_APPLY = "replica.apply"  # store a mutation (a write, a repair or a delivery)
REPLICA_LOCAL_READ = "replica.local_read"  # read one partition for a coordinator
REPLICA_FETCH = "replica.fetch"  # whole mutations by id
REPLICA_PROGRESS_BARRIER = "replica.progress_barrier"
REPLICA_PULL_RANGES = "replica.pull_ranges"
REPLICA_STREAM_RANGE = "replica.stream_range"
REPLICA_RECONCILE_RANGE = "replica.reconcile_range"
# A replica's own commit to the CMS (its registration, a step of its topology operation): the
# parent of the CMS's cms.commit, so the trace crosses from the replica to the CMS.
REPLICA_COMMIT = "replica.commit"
# Any process following the CMS log.
EPOCH_APPLY = "epoch.apply"  # one epoch applied on this node
CATCH_UP = "follower.catch_up"  # waiting for an epoch (a request named one not applied yet)
# The CMS.
CMS_COMMIT = "cms.commit"  # a commit as one member served it (the follower's and the leader's)
CMS_FETCH_LOG = "cms.fetch_log"
CMS_STEP = "cms.step"  # a batch of Paxos messages a member received
CMS_STATE_TRANSFER = "cms.state_transfer"
PAXOS_ROUND = "paxos.round"  # a slot this leader proposed; linked to the commits it carries
# The reconciler.
RECONCILE_ROUND = "reconciler.round"  # parent of its calls to replicas
RECONCILER_COMMIT = "reconciler.commit"  # its registration, a lease grant or release
# A unary gRPC call whose method has no span of its own: "rpc.<Service>/<Method>".
RPC_PREFIX = "rpc."

# The CMS commit's phases, events of the cms.commit span on the member that leads.
PHASE_QUEUED = "queued"
PHASE_VALIDATED = "validated"
PHASE_ACCEPTED = "accepted"  # by a quorum
PHASE_APPLIED = "applied"
PHASE_ANSWERED = "answered"
COMMIT_PHASES = (PHASE_QUEUED, PHASE_VALIDATED, PHASE_ACCEPTED, PHASE_APPLIED, PHASE_ANSWERED)
# An event of replica.progress_barrier: a level timed out and the barrier fell back to a weaker
# one (epochal.relaxed_from -> epochal.consistency).
BARRIER_RELAXED = "relaxed"

# --------------------------------------------------------------------------- span attributes
EPOCH = "epochal.epoch"
KEYSPACE = "epochal.keyspace"
TABLE = "epochal.table"
TOKEN = "epochal.token"
RANGE = "epochal.range"  # a token range, "(left, right]"
CONSISTENCY = "epochal.consistency"
RELAXED_FROM = "epochal.relaxed_from"  # the barrier level that timed out
# What a coordinator's plan missed, found by a replica's newer epoch: "schema", "placements".
BEHIND = "epochal.behind"
REPLICAS_CONTACTED = "epochal.replicas.contacted"  # node ids
REPLICAS_ANSWERED = "epochal.replicas.answered"  # node ids that acknowledged or answered
REQUEST_BYTES = "epochal.bytes"
ROWS = "epochal.rows"
OUTCOME = "epochal.outcome"  # "ok", or the error's rule ("fenced", "timeout", ...)
STATUS_CODE = "rpc.grpc.status_code"  # the gRPC status code's number (semantic conventions)
ERROR_CLASS = "epochal.error"  # the SDK error's class name
ATTEMPT = "epochal.attempt"  # 1 for the first attempt
ATTEMPTS = "epochal.attempts"
COORDINATOR = "epochal.coordinator"  # the address an attempt went to
PEER = "epochal.peer"  # the other member or replica of a call
MUTATION_ID = "epochal.mutation_id"
REPAIR = "epochal.repair"  # a stored mutation was a read repair or a reconciliation delivery
MUTATIONS = "epochal.mutations"
# The CMS.
MEMBER = "epochal.member"
LEADER = "epochal.leader"
TRANSFORMATION = "epochal.transformation"  # the transformation's kind
ENTRY_ID = "epochal.entry_id"
FORWARDED = "epochal.forwarded"  # this member sent the commit on to the leader
DUPLICATE = "epochal.duplicate"
SLOT = "epochal.slot"
BALLOT = "epochal.ballot"
BATCH_SIZE = "epochal.batch_size"
ENTRIES = "epochal.entries"
SINCE_EPOCH = "epochal.since_epoch"
SNAPSHOT = "epochal.snapshot"
MESSAGES = "epochal.messages"  # Paxos message kinds in a batch
# The reconciler.
LOW_BOUND = "epochal.low_bound"
UNRECONCILED = "epochal.unreconciled"
LEASE_TOKEN = "epochal.lease_token"
RECONCILIATION_TIME = "epochal.reconciliation_time"  # the HLC up to which the range agrees
DELIVERED = "epochal.delivered"  # mutations delivered to replicas that lacked them
DELIVERED_BYTES = "epochal.delivered_bytes"
COLLECTED = "epochal.collected"  # log entries the replicas may delete below the low bound
UNREACHABLE = "epochal.unreachable"  # node ids
COHORTS = "epochal.cohorts"
COHORT_DELIVERED_BYTES = "epochal.cohort.delivered_bytes"
COHORT_ID = "epochal.cohort.id"
COHORT_MEMBERS = "epochal.cohort.members"
COHORT_HIGH = "epochal.cohort.high"
COHORT_FOLDED = "epochal.cohort.folded"

# A replica's other work.
OPERATION = "epochal.operation"
SEQUENCE = "epochal.sequence"
TABLE_ID = "epochal.table_id"
SOURCE = "epochal.source"  # the node a range streams from
CELLS = "epochal.cells"
RECONCILED = "epochal.reconciled"
REPAIRED_MUTATIONS = "epochal.repaired_mutations"
REPAIRED_CELLS = "epochal.repaired_cells"
SUMMARY_ROUNDS = "epochal.summary_rounds"
SUMMARIES_AGREED = "epochal.summaries_agreed"
DIFFERING_LOGS = "epochal.differing_logs"  # "node:log_node/Llog" of logs whose summaries differed
NODES = "epochal.nodes"
VERDICT = "epochal.verdict"
FROM_EPOCH = "epochal.from_epoch"
TO_EPOCH = "epochal.to_epoch"
REACHED_EPOCH = "epochal.reached_epoch"

OK = "ok"  # the outcome of work that succeeded
# The outcomes of a cms.commit whose epoch is known: committed now, or an earlier commit of the
# same entry id answered again.
COMMITTED = "committed"
DUPLICATE_COMMIT = "duplicate"
# The outcome of a reconciler.round that moved its range's low bound (the reconciler's own word).
ROUND_ADVANCED = "advanced"
CANCELLED = "cancelled"  # the outcome of work whose caller went away or ran out of time
