"""An asyncio client for reconcilers' status (``epochal.v1.Reconciler/Status``): where each range
of every tracked keyspace stands, as domain values, merged over one or more reconcilers.

Each reconciler reports every range it knows at its own epoch, with the owner its metadata names
(the holder of the range's lease, "" none) and the lease's token; only the owner knows the rest —
the low bound its rounds advanced, the lag, the last round. So, per range, the owner's own report
wins; for a range no answering reconciler owns, the report at the newest epoch stands (the lease
grants it names are the newest known). Reconcilers at different epochs may list ranges that
differ (a topology change split or moved them): each is kept, keyed by keyspace and range.

``status`` needs every reconciler asked to answer: one that cannot be reached, or refuses,
raises the error its status stands for (``Unavailable`` for one unreachable or starting) naming
its address. ``partial_status`` merges the answers it got and names the others with their
errors. Nothing is retried here.

    async with ReconcileClient(["127.0.0.1:9101"]) as reconcilers:
        status = await reconcilers.status()
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from epochal.errors import EpochalError
from epochal.status import error_for, from_rpc_error
from epochal.tcm.tokens import TokenRange
from epochal.wire.channels import channel
from epochal.wire.reconcile import range_from_proto
from epochal.wire.tls import Security
from epochal.wire.v1 import reconciler_pb2 as pb
from epochal.wire.v1 import reconciler_pb2_grpc

STATUS_TIMEOUT_S = 5.0  # a reconciler answers from memory, at once
NO_LAG = -1  # on the wire: the owner has not advanced the range's low bound yet

RangeKey = tuple[str, TokenRange]  # (keyspace, range)


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeStatus:
    """One range as a reconciler reports it. The fields after ``lease_token`` are known only to
    the owner (``reported_by == owner``); from any other reconciler they are empty."""

    keyspace: str
    range: TokenRange  # (left, right]
    owner: str  # the lease holder's reconciler id ("": no lease)
    lease_token: int  # the grant's epoch, its fencing token (0: none)
    reported_by: str  # the id of the reconciler whose report this is
    low_bound: int = 0  # an HLC: every replica holds every mutation below it (0: none yet)
    lag_ms: int | None = None  # now less the low bound's physical time (None: no advance yet)
    last_outcome: str = ""  # the last round's ("": none yet)
    last_round_unix_ms: int = 0
    rounds: int = 0
    delivered: int = 0  # mutations delivered to replicas that lacked them, over every round
    unreachable: tuple[str, ...] = ()  # replicas that did not answer the last round
    cohorts: tuple[CohortStatus, ...] = ()  # cohorts the replicas hold (a long partition's)

    @property
    def owned(self) -> bool:
        return bool(self.owner)


@dataclass(frozen=True, slots=True, kw_only=True)
class CohortStatus:
    """A cohort of a range: its members reconciled among themselves while others were cut off,
    folding the ids of [low, high) (HLCs); ``holders`` hold its data (members, and replicas it
    was delivered to). It ends once the low bound passes ``high``."""

    id: str
    members: tuple[str, ...]
    low: int
    high: int
    mutations: int  # log entries a member folded (held apart: not sent by id)
    bytes: int
    formed_unix_ms: int
    holders: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcilerAnswer:
    """What one reconciler answered: its id and epoch, and its report of every range."""

    address: str
    reconciler_id: str
    epoch: int
    ranges: tuple[RangeStatus, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileStatus:
    """The reconcilers asked, and per range the report that stands, by keyspace then range."""

    reconcilers: tuple[ReconcilerAnswer, ...]
    ranges: tuple[RangeStatus, ...]

    @property
    def owned(self) -> int:
        return sum(1 for r in self.ranges if r.owned)

    @property
    def unowned(self) -> int:
        return len(self.ranges) - self.owned

    @property
    def max_lag_ms(self) -> int | None:
        """The largest lag any owner reported (None: no range advanced yet)."""
        return max((r.lag_ms for r in self.ranges if r.lag_ms is not None), default=None)


def merge(answers: Sequence[ReconcilerAnswer]) -> ReconcileStatus:
    """Per (keyspace, range): the report of its owner — as the newest epoch's report names it —
    if that reconciler answered and owns it too, else the newest epoch's report (of two at the
    same epoch, the first asked's)."""
    newest: dict[RangeKey, tuple[int, RangeStatus]] = {}
    own: dict[tuple[RangeKey, str], RangeStatus] = {}  # (range, reconciler id) -> its own report
    for answer in answers:
        for report in answer.ranges:
            key = (report.keyspace, report.range)
            if key not in newest or answer.epoch > newest[key][0]:
                newest[key] = (answer.epoch, report)
            if report.owned and report.owner == answer.reconciler_id:
                own[(key, report.owner)] = report
    chosen = sorted(
        (own.get((key, report.owner), report) for key, (_, report) in newest.items()),
        key=lambda r: (r.keyspace, r.range),
    )
    return ReconcileStatus(reconcilers=tuple(answers), ranges=tuple(chosen))


class ReconcileClient:
    def __init__(self, addresses: Sequence[str], security: Security | None = None) -> None:
        if not addresses:
            raise ValueError("ReconcileClient needs at least one reconciler address")
        self.addresses = list(addresses)
        self._channels = [channel(a, security) for a in self.addresses]

    async def __aenter__(self) -> ReconcileClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close(grace=None)

    async def status(self, *, timeout_s: float = STATUS_TIMEOUT_S) -> ReconcileStatus:
        """Every reconciler's answer, asked at once, merged. The first failure, in the order
        the addresses were given, is raised."""
        status, failures = await self.partial_status(timeout_s=timeout_s)
        if failures:
            raise failures[0][1]
        return status

    async def partial_status(
        self, *, timeout_s: float = STATUS_TIMEOUT_S
    ) -> tuple[ReconcileStatus, list[tuple[str, EpochalError]]]:
        """The answers of the reconcilers that answered, merged, and each of the others with
        its error (in the order the addresses were given): what an operator sees while some
        reconciler is down."""
        answers = await asyncio.gather(
            *(
                self._ask(a, c, timeout_s)
                for a, c in zip(self.addresses, self._channels, strict=True)
            ),
            return_exceptions=True,
        )
        failures: list[tuple[str, EpochalError]] = []
        for address, answer in zip(self.addresses, answers, strict=True):
            if isinstance(answer, EpochalError):
                failures.append((address, answer))
            elif isinstance(answer, BaseException):
                raise answer
        return merge([a for a in answers if isinstance(a, ReconcilerAnswer)]), failures

    async def _ask(
        self, address: str, channel: grpc.aio.Channel, timeout_s: float
    ) -> ReconcilerAnswer:
        stub = reconciler_pb2_grpc.ReconcilerStub(channel)
        try:
            reply = await stub.Status(pb.ReconcilerStatusRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            raise _naming(address, from_rpc_error(error)) from None
        return _answer(address, reply)


def _naming(address: str, error: EpochalError) -> EpochalError:
    """The same error, its message naming the reconciler."""
    code = grpc.StatusCode[error.status]
    return error_for(code, f"reconciler {address}: {error.message}", rule=error.rule)


def _answer(address: str, reply: pb.ReconcilerStatus) -> ReconcilerAnswer:
    return ReconcilerAnswer(
        address=address,
        reconciler_id=reply.reconciler_id,
        epoch=reply.epoch,
        ranges=tuple(_range(reply.reconciler_id, r) for r in reply.ranges),
    )


def _range(reported_by: str, report: pb.RangeReport) -> RangeStatus:
    return RangeStatus(
        keyspace=report.keyspace,
        range=range_from_proto(report.range, "range"),
        owner=report.owner,
        lease_token=report.lease_token,
        reported_by=reported_by,
        low_bound=report.low_bound,
        lag_ms=None if report.lag_ms == NO_LAG else report.lag_ms,
        last_outcome=report.last_outcome,
        last_round_unix_ms=report.last_round_unix_ms,
        rounds=report.rounds,
        delivered=report.delivered,
        unreachable=tuple(report.unreachable),
        cohorts=tuple(
            CohortStatus(
                id=c.id,
                members=tuple(c.members),
                low=c.low,
                high=c.high,
                mutations=c.mutations,
                bytes=c.bytes,
                formed_unix_ms=c.formed_unix_ms,
                holders=tuple(c.holders),
            )
            for c in report.cohorts
        ),
    )
