"""The one harness of the integration and end-to-end tests: what they share, so that no test
module imports from another.

- ``waiting``: ``until`` (a bounded wait on a condition the system shows, in place of a sleep
  that hopes), ``block_until`` for code without an event loop, ``run`` (a scenario against
  local processes that are killed afterwards whatever happens).
- ``cms``: a CMS with quick elections, the keyspaces the tests commit, a member's log from its
  database or through FetchLog, ``converge``, ``Committers`` (clients committing until stopped).
- ``ring``: a ring of some of the replicas, the ``events`` tables, ``latest`` metadata, read
  groups, sequence steps from the log, a replica's database, ``QuorumWriters`` and the check that
  every quorum of a final read group reads every acknowledged write.
- ``lifecycle``: starting, pausing (``paused``: SIGSTOP for a block) and stopping servers:
  waiting for a log line, a signal and the time to exit, what a clean stop must not log, every
  method of a service.
- ``processes``: processes known by pid and start time (a dev cluster's servers).
- ``metrics``: a process's metrics as Prometheus scrapes them (``scrape``), one sample that
  must exist (``sample``), a family's total over some labels (``total``).
- ``otlp``: spans as a collector sees them: an OTLP trace receiver (``otlp_receiver``) and a
  reader of the OTLP-JSON span files (``file_spans``, ``traces_data``), each span with its
  resource's attributes; ``run_application`` (a traced application as a process of its own) and
  ``QUICK_RECONCILER`` (a reconciler's flags for rounds every 100 ms).
"""

from .cms import (
    FAST_ELECTIONS,
    Committers,
    commit_then_stop,
    converge,
    keyspace,
    local_cms,
    log_entries,
    plant_accepted_slot,
    read_log,
    storage_of,
)
from .lifecycle import (
    GRACE_S,
    NOISE,
    assert_quiet,
    call_each_method,
    first_answer,
    paused,
    paused_processes,
    signal_and_time_exit,
    until_logged,
)
from .metrics import sample, scrape, total
from .otlp import (
    QUICK_RECONCILER,
    ReceivedSpan,
    TraceReceiver,
    file_spans,
    otlp_receiver,
    run_application,
    traces_data,
)
from .processes import Pid
from .ring import (
    EVENTS,
    HOLD_MS,
    QuorumWriters,
    assert_every_quorum_reads_every_write,
    create_events,
    key_token,
    latest,
    read_group,
    read_seqs,
    replica_db,
    replica_rows,
    start_ring,
    steps_of,
    steps_since,
)
from .waiting import block_until, run, until

__all__ = [
    "EVENTS",
    "FAST_ELECTIONS",
    "GRACE_S",
    "HOLD_MS",
    "NOISE",
    "QUICK_RECONCILER",
    "Committers",
    "Pid",
    "QuorumWriters",
    "ReceivedSpan",
    "TraceReceiver",
    "assert_every_quorum_reads_every_write",
    "assert_quiet",
    "block_until",
    "call_each_method",
    "commit_then_stop",
    "converge",
    "create_events",
    "file_spans",
    "first_answer",
    "key_token",
    "keyspace",
    "latest",
    "local_cms",
    "log_entries",
    "otlp_receiver",
    "paused",
    "paused_processes",
    "plant_accepted_slot",
    "read_group",
    "read_log",
    "read_seqs",
    "replica_db",
    "replica_rows",
    "run",
    "run_application",
    "sample",
    "scrape",
    "signal_and_time_exit",
    "start_ring",
    "steps_of",
    "steps_since",
    "storage_of",
    "total",
    "traces_data",
    "until",
    "until_logged",
]
