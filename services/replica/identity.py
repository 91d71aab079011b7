"""Who this replica is: registered with the CMS on first start, the node id kept on disk.

Registration is at most once: the Register commit's entry id is stored before it is sent, so a
replica that crashes before it learns its id retries with the same entry id and the CMS
answers the first commit's epoch; the node is the one that Register created at that epoch.
"""

from __future__ import annotations

import logging
import uuid

from epochal.cms_client import CMSClient, CommitObserver
from epochal.errors import EpochalError, InvalidRequest, Rejected
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.runtime.commit_tracing import traced_commit
from epochal.runtime.follower import MetadataFollower
from epochal.tcm import ClusterMetadata, Register
from epochal.telemetry import attributes as attr

log = logging.getLogger(__name__)


class RegistrationFailed(Exception):
    """Registration did not complete; ``permanent`` when the CMS refused it (the address
    belongs to another node, say), else it is worth retrying."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def node_number(node_id: str) -> int:
    """``node-7`` -> 7: the number that names this node's mutations."""
    prefix, _, number = node_id.rpartition("-")
    if prefix != "node" or not number.isdigit() or int(number) <= 0:
        raise ValueError(f"node id {node_id!r} is not of the form node-<n>")
    return int(number)


async def register(
    settings: ReplicaSettings,
    storage: ReplicaStorage,
    follower: MetadataFollower,
    observer: CommitObserver | None = None,
) -> str:
    """This node's id: the stored one, or a new registration's (its commit told to
    ``observer``)."""
    state = storage.identity.node_state()
    if state.node_id:
        return state.node_id
    entry_id = state.register_entry_id or f"register-{uuid.uuid4().hex}"
    if not state.register_entry_id:
        storage.identity.set_register_entry_id(entry_id)
    transformation = Register(
        address=settings.address,
        datacenter=settings.datacenter,
        rack=settings.rack,
        version=settings.software_version,
    )
    async with CMSClient(settings.cms, total_timeout_s=60.0, observer=observer) as cms:
        try:
            committed = await traced_commit(cms, attr.REPLICA_COMMIT, transformation, entry_id)
        except (Rejected, InvalidRequest) as error:
            raise RegistrationFailed(
                f"the CMS refused to register {settings.address}: {error.message}",
                permanent=True,
            ) from None
        except EpochalError as error:
            raise RegistrationFailed(f"the CMS did not answer: {error.message}") from None
    if not await follower.catch_up(committed.epoch, timeout_s=60.0):
        raise RegistrationFailed(f"registered at epoch {committed.epoch} but cannot fetch it")
    node_id = registered_at(follower.metadata, settings.address, committed.epoch)
    storage.identity.set_node_id(node_id)
    log.info("registered %s as %s at epoch %d", settings.address, node_id, committed.epoch)
    return node_id


def registered_at(metadata: ClusterMetadata, address: str, epoch: int) -> str:
    for node in metadata.nodes.values():
        if node.address == address and node.registered_epoch == epoch:
            return node.node_id
    raise RegistrationFailed(
        f"no node with address {address} was registered at epoch {epoch} (was it "
        "unregistered meanwhile?)",
        permanent=True,
    )
