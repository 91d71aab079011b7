"""The CMS member core (pure): batching, validation at the tail, at-most-once answers,
forwarding, apply, reconfiguration, catching up — driven by the CMS server and by the simulator
alike (see ``core`` for the theory of operation)."""

from epochal.cmscore.config import KNOWN_BUGS, MEMBER_BUGS, MemberConfig
from epochal.cmscore.core import MemberCore, Route, Routing
from epochal.cmscore.flush import AppliedBatch

__all__ = [
    "KNOWN_BUGS",
    "MEMBER_BUGS",
    "AppliedBatch",
    "MemberConfig",
    "MemberCore",
    "Route",
    "Routing",
]
