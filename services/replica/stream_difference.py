"""The difference step of a tracked join (``stream_receiver``): what a joining node takes from
the range's other replicas once a piece's cells came with their log ids.

Another replica sends the ids of its log of the piece, each marked whole or held by id. For the
ids this node holds no entry of: the mutation whole from that replica when it holds it whole;
else (it holds it by id: its data came streamed) the partition's cells from it, whole — they hold
the mutation's effect, none torn — and the id kept by id. Ids a replica listed whole are
*covered*: a body of them outlives the join. The entries this node holds by id that no other
replica listed whole — writes only the stream's source had, which may be giving the range up —
are fetched whole from the source before the node is promoted (``cover``), so a body of every id
it lists stays somewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochal.errors import StreamRefused
from epochal.mtrack import MutationId
from epochal.replica.borrowed import fetch_bodies
from epochal.replica.handles import PeerFailed
from epochal.replica.local_replica import Outcome, PartitionRead
from epochal.replica.model import Cell, Mutation
from epochal.replica.settings import ReplicaSettings
from epochal.replica.storage import ReplicaStorage
from epochal.replica.stream_plan import Piece
from epochal.replica.stream_values import StreamedId
from epochal.runtime.follower import MetadataFollower

if TYPE_CHECKING:
    from epochal.replica.coordinator import Coordinator

Fill = tuple[str, int, bytes, Cell]  # (table id, token, partition key, cell)


@dataclass(eq=False, repr=False)
class Difference:
    """One piece's difference step."""

    settings: ReplicaSettings
    follower: MetadataFollower
    storage: ReplicaStorage
    coordinator: Coordinator
    piece: Piece
    covered: set[tuple[int, int, int]] = field(default_factory=set)

    async def lacking(
        self, node_id: str, ids: Sequence[StreamedId]
    ) -> tuple[list[tuple[Mutation, bytes]], list[Fill], list[StreamedId]]:
        """For ids ``node_id`` listed: the mutations to store whole, the cells to store, and
        the ids to keep by id with those cells."""
        if node_id not in self.piece.movement.sources:  # (a node that keeps the range)
            self.covered |= {i.mutation_id.key for i in ids if i.whole}
        held = self.storage.data.held_ids([i.mutation_id for i in ids])
        wanted = [i for i in ids if i.mutation_id.key not in held]
        if not wanted:
            return [], [], []
        metadata = self.follower.metadata
        handle = self.coordinator.handle(metadata, node_id)
        timeout_s = self.settings.stream_timeout_s
        try:
            whole = [i.mutation_id for i in wanted if i.whole]
            fetched = await fetch_bodies(handle, metadata.epoch, whole, timeout_s=timeout_s)
            rest = [i for i in wanted if i.mutation_id.key not in fetched]
            fills: list[Fill] = []
            for token, pkey in sorted({(i.token, i.partition_key) for i in rest}):
                read = PartitionRead(self.piece.keyspace, self.piece.table_id, token, pkey)
                reply = await handle.read(
                    metadata.epoch,
                    read,
                    data=True,
                    summary=False,
                    digest=False,
                    timeout_s=timeout_s,
                )
                if reply.outcome is not Outcome.OK:
                    raise PeerFailed(node_id, f"{reply.outcome.value}: {reply.message}")
                fills += [(self.piece.table_id, token, pkey, cell) for cell in reply.cells]
        except PeerFailed as error:
            raise StreamRefused(f"taking the difference of {self.piece} from {error}") from None
        return list(fetched.values()), fills, rest

    async def cover(self, streamed_from: str) -> list[tuple[Mutation, bytes]]:
        """The entries of the piece held here by id that no replica keeping the range listed
        whole, whole from the piece's sources (``streamed_from`` first; after a restart this
        run listed nothing, so every such entry is taken). StreamRefused when one is whole
        nowhere reachable."""
        piece = self.piece
        mine = self.storage.data.held_by_id_in(
            piece.keyspace, piece.table_id, piece.left, piece.right
        )
        by_token: dict[int, list[MutationId]] = {}
        for mutation_id, token in mine:
            if mutation_id.key not in self.covered:
                by_token.setdefault(token, []).append(mutation_id)
        uncovered = [i for ids in by_token.values() for i in ids]
        if not uncovered:
            return []
        metadata = self.follower.metadata
        me = self.follower.node_id
        candidates = dict.fromkeys(
            n
            for n in (streamed_from, *piece.movement.sources, *piece.movement.fallback)
            if n and n != me
        )
        fetched: dict[tuple[int, int, int], tuple[Mutation, bytes]] = {}
        held: set[tuple[int, int, int]] = set()  # below a holder's low bound: held everywhere
        for node in candidates:
            try:
                handle = self.coordinator.handle(metadata, node)
                for token, ids in sorted(by_token.items()):
                    wanted = [i for i in ids if i.key not in fetched and i.key not in held]
                    if wanted:
                        fetched |= await fetch_bodies(
                            handle,
                            metadata.epoch,
                            wanted,
                            timeout_s=self.settings.stream_timeout_s,
                            keyspace=piece.keyspace,
                            token=token,
                            held=held,
                        )
            except PeerFailed:
                continue
        left = [i for i in uncovered if i.key not in fetched and i.key not in held]
        if left:
            raise StreamRefused(
                f"{len(left)} mutations of {piece} (e.g. {left[0]}) are whole on no reachable "
                f"replica of {sorted(candidates)}: retry when they answer"
            )
        return list(fetched.values())
