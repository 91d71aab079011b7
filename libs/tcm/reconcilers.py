"""Reconcilers in the metadata log: each announces the address it serves on. Pure.

Theory of operation
-------------------
The metadata names every replica (``nodes``) and every CMS member (``cms_members``) with an
address; reconcilers appear in lease grants by id only. ``RegisterReconciler`` adds the missing
piece: ``ClusterMetadata.reconcilers`` maps a reconciler's id to the ``host:port`` it advertises,
so an operator's tool finds every reconciler from the metadata alone.

* *A registration is an upsert*: a reconciler commits it at every start, with whatever address
  it advertises now. Registering the same id at the same address again is accepted (an epoch
  that changes nothing: the reconciler skips the commit when it sees itself registered, so only
  a race makes one); at a new address it moves the entry.
* *A deregistration is a registration at no address* (``address=""``), committed by a reconciler
  that stops on purpose. One that was killed stays registered, so a tool shows it unreachable
  rather than forgetting it. Deregistering an id that is not registered is refused
  (``reconciler_not_found``): the caller learns that its entry was already gone.
* *An address is one process*: a registration at an address another id holds replaces that id
  (a reconciler restarted there under a new id: the old one is gone).
* *Registrations stay few*: at most ``MAX_RECONCILERS`` ids; past that a new id is refused
  (``too_many_reconcilers``) until stale entries are deregistered. The map is kept sorted by id,
  so every member builds the same metadata and the same bytes.
* Nothing else reads the map: leases are held by id whether or not the holder is registered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from epochal.errors import Rejected
from epochal.tcm.leases import MAX_HOLDER_CHARS
from epochal.tcm.metadata import ClusterMetadata
from epochal.tcm.schema import frozen_map
from epochal.tcm.transformations import Transformation

MAX_RECONCILERS = 256
MAX_ADDRESS_CHARS = 256
DEREGISTERED = ""  # the address of a registration that removes the reconciler's entry
NOT_REGISTERED = "reconciler_not_found"  # the rule that refuses deregistering an unknown id


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterReconciler(Transformation):
    """Records that reconciler ``reconciler_id`` serves on ``address`` (host:port);
    ``address=""`` (DEREGISTERED) removes its entry."""

    reconciler_id: str
    address: str
    kind: ClassVar[str] = "register_reconciler"

    def check_input(self) -> None:
        """An id of 1..MAX_HOLDER_CHARS (the ids lease grants name), and no address or one
        ``host:port`` of at most MAX_ADDRESS_CHARS."""
        if not 1 <= len(self.reconciler_id) <= MAX_HOLDER_CHARS:
            raise Rejected(
                "bad_reconciler",
                f"reconciler id is {len(self.reconciler_id)} characters; it is "
                f"1..{MAX_HOLDER_CHARS}",
            )
        if self.address == DEREGISTERED:
            return
        if len(self.address) > MAX_ADDRESS_CHARS:
            raise Rejected(
                "bad_reconciler",
                f"address is {len(self.address)} characters; at most {MAX_ADDRESS_CHARS}",
            )
        if not is_host_port(self.address):
            raise Rejected(
                "bad_reconciler",
                f"bad reconciler address {self.address[:40]!r}: expected one host:port "
                '("" deregisters)',
            )

    def check(self, metadata: ClusterMetadata) -> None:
        self.check_input()  # born with the kind: chosen entries are held to it too
        registered = self.reconciler_id in metadata.reconcilers
        if self.address == DEREGISTERED:
            if not registered:
                raise Rejected(
                    NOT_REGISTERED,
                    f"no reconciler {self.reconciler_id!r} is registered: nothing to deregister",
                )
        elif not registered and len(metadata.reconcilers) >= MAX_RECONCILERS:
            raise Rejected(
                "too_many_reconcilers",
                f"{len(metadata.reconcilers)} reconcilers are registered, the most there may "
                f"be ({MAX_RECONCILERS}); deregister stale ones (RegisterReconciler with an "
                "empty address) first",
            )

    def change(self, metadata: ClusterMetadata, epoch: int) -> ClusterMetadata:
        entries = {
            k: v
            for k, v in metadata.reconcilers.items()
            if k != self.reconciler_id and (v != self.address or self.address == DEREGISTERED)
        }
        if self.address != DEREGISTERED:
            entries[self.reconciler_id] = self.address
        return replace(metadata, reconcilers=frozen_map(dict(sorted(entries.items()))))

    def __str__(self) -> str:
        return f"RegisterReconciler({self.reconciler_id} at {self.address or 'nowhere: gone'})"


def is_host_port(address: str) -> bool:
    """``address`` is one ``host:port``: a host of printable characters without spaces or commas
    and a port in 1..65535. A rule of its own, fixed here: chosen entries are checked with it
    again when applied, so it must not change with the command line's flag parsing."""
    host, sep, port = address.rpartition(":")
    return (
        bool(sep and host and port.isdigit())
        and 1 <= int(port) <= 65535
        and host.isprintable()
        and not any(c in host for c in " ,")
    )
