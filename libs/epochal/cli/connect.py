"""The cluster as the command line finds it: from any replica or CMS member, the metadata at the
newest epoch, and through it every process — replicas (the directory), CMS members (their
membership) and reconcilers (their registrations).

Theory of operation
-------------------
The addresses given (``--cluster``) are asked in turn what they are — gRPC server reflection
lists the services a process serves: ``epochal.v1.Replica``, ``epochal.v1.CMS`` or
``epochal.v1.Reconciler`` — and the first replica or CMS member that answers gives the log
(``FetchLog``, page by page, from epoch 0: its snapshot and the entries after it). A replica
serves the log it has applied, which may lag the CMS's: its view is brought forward from the
first CMS member it names that answers (it stands as it is when none does). A reconciler serves
no log, so one named alone is refused with what to name instead. Everything after that is found
in the metadata: nothing else needs to be configured.

The calls the commands make of single processes (``describe_replica``, ``health``,
``cms_describe``) go over their own channels, each bounded by a timeout (``PROBE_TIMEOUT_S``
unless given): a process stopped mid-call (SIGSTOP) costs that much, never a hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from epochal.admin import ReplicaDescription
from epochal.admin_client import AdminClient
from epochal.cli.failures import Refused, Unreachable, WrongKind
from epochal.cms_client import CMSClient, CMSView
from epochal.errors import EpochalError
from epochal.metadata_view import apply_page
from epochal.probes import health_of, services_of
from epochal.tcm import ClusterMetadata, NodeInfo, NodeState
from epochal.wire.channels import Channels
from epochal.wire.log import LogClient, LogSourceFailed

REPLICA, CMS, RECONCILER = "replica", "CMS member", "reconciler"
KIND_OF_SERVICE = {
    "epochal.v1.Replica": REPLICA,
    "epochal.v1.CMS": CMS,
    "epochal.v1.Reconciler": RECONCILER,
}
PROBE_TIMEOUT_S = 3.0  # a process that does not answer its health or Describe within this is down
MAX_LOG_PAGES = 10_000


def not_answered(address: str, error: EpochalError) -> Unreachable:
    """The one line for a process that did not answer (the first line of gRPC's reason)."""
    said = error.message.splitlines()[0] if error.message else ""
    hint = ""
    if "handshake" in said.lower():
        hint = (
            "; the TLS handshake failed: check that --tls-ca (EPOCHAL_TLS_CA) is the CA that "
            "signed the cluster's certificates and yours, that yours has not expired, and that "
            "the cluster runs with TLS"
        )
    return Unreachable(
        f"{address} did not answer ({error.status}{': ' + said if said else ''}){hint}"
    )


@dataclass
class Cluster:
    """The metadata the cluster has and the channels to its processes."""

    metadata: ClusterMetadata
    channels: Channels = field(default_factory=Channels)

    # --------------------------------------------------------------- who is where

    def live_nodes(self) -> list[NodeInfo]:
        """The nodes of the directory that have not left, by id."""
        return sorted(
            (n for n in self.metadata.nodes.values() if n.state is not NodeState.LEFT),
            key=lambda n: n.node_id,
        )

    def cms_addresses(self) -> list[str]:
        return [m.address for m in self.metadata.cms_members]

    def reconcilers(self) -> dict[str, str]:
        """Reconciler id -> address, as they registered."""
        return dict(sorted(self.metadata.reconcilers.items()))

    def node(self, ref: str) -> NodeInfo:
        """The replica ``ref`` names (its node id or its address); Refused, saying what it is,
        when it names another kind of process or nothing known."""
        found = [n for n in self.metadata.nodes.values() if ref in (n.node_id, n.address)]
        present = [n for n in found if n.state is not NodeState.LEFT]
        if len(present) > 1:  # an address is held by one node that has not left
            raise Refused(f"{ref} names {', '.join(n.node_id for n in present)}: name one by id")
        if found:
            return (present or found)[0]
        for member in self.metadata.cms_members:
            if ref in (member.member_id, member.address):
                raise WrongKind(f"{ref} is a CMS member ({member.member_id}), not a replica")
        for reconciler_id, address in self.reconcilers().items():
            if ref in (reconciler_id, address):
                raise WrongKind(f"{ref} is a reconciler ({reconciler_id}), not a replica")
        known = ", ".join(n.node_id for n in self.live_nodes()) or "none"
        raise Refused(
            f"no replica {ref!r} in the metadata at epoch {self.metadata.epoch} (replicas: {known})"
        )

    # --------------------------------------------------------------- asking processes

    async def describe_replica(
        self, address: str, timeout_s: float = PROBE_TIMEOUT_S
    ) -> ReplicaDescription:
        """What the replica at ``address`` says of itself; Unreachable when it does not answer
        within ``timeout_s``."""
        async with AdminClient(address) as admin:
            try:
                return await admin.describe(timeout_s=timeout_s)
            except EpochalError as error:
                raise not_answered(address, error) from None

    async def cms_describe(self, address: str, timeout_s: float = PROBE_TIMEOUT_S) -> CMSView:
        """What the CMS member at ``address`` says of the CMS (one attempt)."""
        async with CMSClient([address], attempt_timeout_s=timeout_s) as member:
            try:
                return await member.describe(0)
            except EpochalError as error:
                raise not_answered(address, error) from None

    async def health(self, address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
        """The gRPC health of the process at ``address``: SERVING, NOT_SERVING, ... or the
        status of the failed check (DEADLINE_EXCEEDED: it did not answer in time)."""
        return await health_of(self.channels, address, timeout_s)

    async def close(self) -> None:
        await self.channels.close()


async def kind_of(channels: Channels, address: str, timeout_s: float) -> str:
    """What the process at ``address`` is (REPLICA, CMS, RECONCILER); Unreachable when it does
    not answer, Refused when it is not an Epochal process."""
    try:
        names = await services_of(channels, address, timeout_s)
    except EpochalError as error:
        if error.status == "UNIMPLEMENTED":
            raise WrongKind(
                f"{address} is not an Epochal process (it serves no reflection)"
            ) from None
        raise not_answered(address, error) from None
    for service, kind in KIND_OF_SERVICE.items():
        if service in names:
            return kind
    raise WrongKind(f"{address} is not an Epochal process (it serves {', '.join(sorted(names))})")


async def connect(seeds: Sequence[str], timeout_s: float) -> Cluster:
    """The cluster, from the first of ``seeds`` that is a replica or CMS member and answers."""
    channels = Channels()
    problems: list[str] = []
    refusals: list[str] = []
    wrong: list[str] = []
    try:
        for address in seeds:
            try:
                kind = await kind_of(channels, address, min(timeout_s, PROBE_TIMEOUT_S))
                if kind == RECONCILER:
                    wrong.append(
                        f"{address} is a reconciler, not a replica or CMS member: name one of "
                        "those with --cluster (reconcilers are found through them)"
                    )
                    continue
                metadata = await latest_metadata(channels, address, kind == CMS, timeout_s)
                if kind == REPLICA:  # a replica's copy may lag: the CMS has the newest
                    metadata = await _from_the_cms(channels, metadata, timeout_s)
            except Unreachable as error:
                problems.append(error.message)
                continue
            except Refused as error:
                refusals.append(error.message)
                continue
            return Cluster(metadata=metadata, channels=channels)
    except BaseException:
        await channels.close()
        raise
    await channels.close()
    if wrong and not problems and not refusals:
        raise WrongKind("; ".join(wrong))
    if refusals and not problems:
        raise Refused("; ".join(refusals + wrong))
    if len(seeds) == 1:
        raise Unreachable(problems[0])
    raise Unreachable(
        "no replica or CMS member answered: " + "; ".join(problems + refusals + wrong)
    )


async def _from_the_cms(
    channels: Channels, metadata: ClusterMetadata, timeout_s: float
) -> ClusterMetadata:
    """``metadata`` brought to the newest epoch from the first CMS member it names that answers
    (as it is when none does: the replica's view is still a view)."""
    for member in metadata.cms_members:
        try:
            return await latest_metadata(
                channels, member.address, True, min(timeout_s, PROBE_TIMEOUT_S), metadata
            )
        except (Unreachable, Refused):
            continue
    return metadata


async def latest_metadata(
    channels: Channels,
    address: str,
    from_cms: bool,
    timeout_s: float,
    metadata: ClusterMetadata | None = None,
) -> ClusterMetadata:
    """The metadata at the newest epoch ``address`` has, from its log (after ``metadata``'s
    epoch, when given)."""
    log = LogClient(channels)
    metadata = metadata or ClusterMetadata.empty()
    for _ in range(MAX_LOG_PAGES):
        try:
            page = await log.fetch(
                address, from_cms=from_cms, since_epoch=metadata.epoch, timeout_s=timeout_s
            )
        except LogSourceFailed as error:
            if error.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                raise Unreachable(f"{address} did not answer ({error})") from None
            raise Refused(f"{address} did not give its log ({error})") from None
        moved = apply_page(metadata, page)
        progressed = moved.epoch > metadata.epoch
        metadata = moved
        if not page.has_more or metadata.epoch >= page.latest_epoch or not progressed:
            return metadata
    return metadata
