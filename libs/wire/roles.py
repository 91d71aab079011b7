"""Who may call what: the roles a certificate carries, and the one table every process checks
them against (kept here, beside the status tables of ``epochal.wire.status``).

A certificate's roles are its subject alternative names of the form ``urn:epochal:role:<role>``
(a URI SAN, ``ROLE_URI_PREFIX``; ``epochal certs issue --role`` writes them; a certificate may
carry several). The roles:

- ``cms``: a CMS member. Paxos and forwarding among members; its own candidacy.
- ``replica``: a replica. Peer and reconcile calls; registering itself and the topology
  operations it runs (joins, leaves, replacements, moves, their steps and their cancels).
- ``reconciler``: peer and reconcile calls; registering itself and its lease grants.
- ``client``: an application. Reads, writes and DDL.
- ``operator``: whatever a client may, and admin calls (topology operations, cleanup, test
  hooks), cancels, unregistering a node or a reconciler, snapshots and CMS membership.

Reading metadata or status (``FetchLog``, ``Watch``, ``Describe``, ``AppliedEpochs``, the
reconciler's ``Status``, reflection) is open to every role; health to every certificate, with
or without a role (and to anyone on a server's plaintext health port, which serves nothing
else). ``CMS.Commit`` is checked by the kind of transformation it carries (``COMMIT_KINDS``).

A replica commits a ``cancel_sequence`` and another replica's ``Cleanup`` runs on request of a
replica: those run the operations an operator started through ``ReplicaAdmin`` (operator only),
so the chain of authority starts with an operator.

A server with TLS refuses any call that did not come over it (``Guard(require_tls=True)``); a
server started ``--insecure`` checks nothing (every call is plain text), and its health port
serves health only.

What a role does not say: which node. A replica's certificate is trusted as a replica, so it may
commit the steps or the cancel of any node's operation and ask any replica for a cleanup; a
reconciler's may deregister another reconciler. Node ids are given at registration, after the
certificate is issued, so binding one to a certificate is not done here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

import grpc

log = logging.getLogger(__name__)

ROLE_URI_PREFIX = "urn:epochal:role:"
CMS, REPLICA, RECONCILER, CLIENT, OPERATOR = "cms", "replica", "reconciler", "client", "operator"
ROLES = (CMS, REPLICA, RECONCILER, CLIENT, OPERATOR)
EVERY_ROLE = frozenset(ROLES)
ANY_CERTIFICATE = frozenset({"*"})  # a certificate the CA signed, whatever its roles
BY_KIND = frozenset({"by kind"})  # CMS.Commit: by its transformation's kind
COMMIT_METHOD = "/epochal.v1.CMS/Commit"

_DATA = frozenset({CLIENT, OPERATOR})
_INTERNAL = frozenset({REPLICA, RECONCILER})
_ADMIN = frozenset({OPERATOR})

# method (gRPC's full name) -> the roles that may call it
METHODS: Mapping[str, frozenset[str]] = {
    COMMIT_METHOD: BY_KIND,
    "/epochal.v1.CMS/FetchLog": EVERY_ROLE,
    "/epochal.v1.CMS/Watch": EVERY_ROLE,
    "/epochal.v1.CMS/Describe": EVERY_ROLE,
    "/epochal.v1.CMSPeer/Step": frozenset({CMS}),
    "/epochal.v1.CMSPeer/Forward": frozenset({CMS}),
    "/epochal.v1.Replica/Write": _DATA,
    "/epochal.v1.Replica/Read": _DATA,
    "/epochal.v1.Replica/Session": _DATA,
    "/epochal.v1.Replica/FetchLog": EVERY_ROLE,
    "/epochal.v1.Replica/Describe": EVERY_ROLE,
    "/epochal.v1.Replica/AppliedEpochs": EVERY_ROLE,
    "/epochal.v1.ReplicaPeer/Exchange": _INTERNAL,
    "/epochal.v1.ReplicaPeer/AwaitEpoch": _INTERNAL,
    "/epochal.v1.ReplicaPeer/StreamRange": _INTERNAL,
    "/epochal.v1.ReplicaPeer/PullRanges": _INTERNAL,
    "/epochal.v1.ReplicaAdmin/Bootstrap": _ADMIN,
    "/epochal.v1.ReplicaAdmin/BootstrapResume": _ADMIN,
    "/epochal.v1.ReplicaAdmin/BootstrapAbort": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Decommission": _ADMIN,
    "/epochal.v1.ReplicaAdmin/DecommissionAbort": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Remove": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Replace": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Move": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Resume": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Cancel": _ADMIN,
    "/epochal.v1.ReplicaAdmin/Cleanup": frozenset({OPERATOR, REPLICA}),
    "/epochal.v1.ReplicaAdmin/Status": _ADMIN,
    "/epochal.v1.ReplicaReconcile/RangeState": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/RangeSummary": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/Deliver": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/Fence": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/AdvanceLowBound": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/FoldCohort": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/DeliverCohort": _INTERNAL,
    "/epochal.v1.ReplicaReconcile/HoldCohort": _INTERNAL,
    "/epochal.v1.ReplicaTesting/SetHooks": _ADMIN,
    "/epochal.v1.Reconciler/Status": EVERY_ROLE,
    "/grpc.health.v1.Health/Check": ANY_CERTIFICATE,
    "/grpc.health.v1.Health/Watch": ANY_CERTIFICATE,
    "/grpc.health.v1.Health/List": ANY_CERTIFICATE,
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": EVERY_ROLE,
}

_DDL = _DATA
# CMS.Commit: the transformation's kind (its field in Transformation's oneof) -> who may commit it
COMMIT_KINDS: Mapping[str, frozenset[str]] = {
    "initialize_cms": frozenset(),  # the first member's own, never sent to Commit
    "create_keyspace": _DDL,
    "alter_keyspace": _DDL,
    "drop_keyspace": _DDL,
    "create_table": _DDL,
    "alter_table": _DDL,
    "drop_table": _DDL,
    "register": frozenset({REPLICA}),
    "unregister": _ADMIN,
    "trigger_snapshot": _ADMIN,
    "prepare_join": frozenset({REPLICA}),
    "prepare_leave": frozenset({REPLICA}),
    "prepare_replace": frozenset({REPLICA}),
    "prepare_move": frozenset({REPLICA}),
    "advance_sequence": frozenset({REPLICA}),
    "cancel_sequence": frozenset({REPLICA, OPERATOR}),
    "add_cms_candidate": frozenset({CMS}),
    "start_add_to_cms": _ADMIN,
    "finish_add_to_cms": _ADMIN,
    "remove_from_cms": _ADMIN,
    "grant_reconcile_lease": frozenset({RECONCILER}),
    "register_reconciler": frozenset({RECONCILER, OPERATOR}),
}

LOG_EVERY_S = 10.0  # one log line per caller and method this often; the rest counted in it
LOGGED_CALLERS = 1024  # (caller, method) pairs remembered for that; forgotten all at once beyond


def roles_of(context: grpc.aio.ServicerContext) -> frozenset[str] | None:
    """The roles of the caller's certificate; None for a call over plain text."""
    auth = context.auth_context()
    if b"ssl" not in auth.get("transport_security_type", ()):
        return None
    uris = (uri.decode(errors="replace") for uri in auth.get("peer_uri", ()))
    return frozenset(u[len(ROLE_URI_PREFIX) :] for u in uris if u.startswith(ROLE_URI_PREFIX))


def _subject(context: grpc.aio.ServicerContext) -> str:
    subject = b",".join(context.auth_context().get("x509_subject", ()))
    return subject.decode(errors="replace") or "no subject"


def identity_of(context: grpc.aio.ServicerContext) -> str:
    """The caller as a log line names it: its certificate's subject, its roles, its address."""
    subject = _subject(context)
    roles = ",".join(sorted(roles_of(context) or ())) or "no role"
    return f"{subject} (roles {roles}) at {context.peer()}"


def allowed(needed: frozenset[str], roles: Iterable[str]) -> bool:
    return needed == ANY_CERTIFICATE or bool(needed & frozenset(roles))


def needed_text(needed: frozenset[str]) -> str:
    if not needed:
        return "no role (it is never called)"
    names = sorted(needed)
    return (
        ("the " + " or ".join(names) + " role")
        if len(names) < 3
        else ("one of the roles " + ", ".join(names))
    )


class Guard:
    """A process's check of its callers: ``refusal`` says why a call may not go on (answered
    PERMISSION_DENIED, logged with the caller's identity and counted), or None."""

    def __init__(self, refused: object | None = None, *, require_tls: bool = False) -> None:
        self._refused = refused  # a Counter labelled by method, or None
        self._require_tls = require_tls  # a server with TLS: a plain-text call is refused
        self._logged: dict[tuple[str, str], tuple[float, int]] = {}

    def method_refusal(self, full_name: str, context: grpc.aio.ServicerContext) -> str | None:
        roles = roles_of(context)
        if roles is None:
            if self._require_tls:
                return self._refuse(context, full_name, "this server takes mutual TLS only", set())
            return None
        needed = METHODS.get(full_name, frozenset({OPERATOR}))  # a method not listed: operators
        if needed == BY_KIND or allowed(needed, roles):
            return None
        reason = f"{full_name.lstrip('/')} needs {needed_text(needed)}"
        return self._refuse(context, full_name, reason, roles)

    def request_refusal(
        self, full_name: str, request: object, context: grpc.aio.ServicerContext
    ) -> str | None:
        """For a method checked by its request (``CMS.Commit``: by its transformation's kind;
        one without a kind is the method's to refuse as malformed)."""
        if full_name != COMMIT_METHOD:
            return None
        roles = roles_of(context)
        transformation = getattr(request, "transformation", None)
        kind = transformation.WhichOneof("kind") if transformation is not None else None
        if roles is None or kind is None:
            return None
        needed = COMMIT_KINDS.get(kind, frozenset({OPERATOR}))
        if allowed(needed, roles):
            return None
        reason = f"committing {kind} needs {needed_text(needed)}"
        return self._refuse(context, full_name, reason, roles)

    def _refuse(
        self,
        context: grpc.aio.ServicerContext,
        full_name: str,
        reason: str,
        roles: frozenset[str] | set[str],
    ) -> str:
        has = ", ".join(sorted(roles)) or "none"
        message = f"permission denied: {reason}; this certificate's roles: {has}"
        if self._refused is not None:
            self._refused.labels(full_name.lstrip("/")).inc()  # type: ignore[attr-defined]
        key = (_subject(context), full_name)  # not the address: a new port per connection
        now = time.monotonic()
        last, quiet = self._logged.get(key, (-LOG_EVERY_S, 0))
        if now - last >= LOG_EVERY_S:
            more = f" ({quiet} more refused since the last line)" if quiet else ""
            who = identity_of(context)
            log.warning("refused %s to %s: %s%s", full_name.lstrip("/"), who, message, more)
            if len(self._logged) >= LOGGED_CALLERS:
                self._logged.clear()
            self._logged[key] = (now, 0)
        else:
            self._logged[key] = (last, quiet + 1)
        return message


DEFAULT_GUARD = Guard()
