"""Execution profiles: named sets of how a call runs — its consistency level, timeout, retry
policy and routing — as the DataStax driver has them.

A client holds a ``"default"`` profile (from its keyword arguments, or given) and any others by
name; a call names a profile (``profile="analytics"``) and may override its consistency and
timeout (``consistency=``, ``timeout_s=``). ``Profiles.resolve`` makes the call's ``Settings``
and refuses, with ``InvalidRequest``, what cannot work: an unknown profile (the message lists
the known ones), a level that is not one (the message lists the levels), a timeout that is not
positive, and ``LOCAL_QUORUM`` without a local datacenter — a coordinator's "local" is its own
datacenter, so without ``local_dc`` the level would count in whichever datacenter the call
happened to reach (a call pinned to a coordinator names that datacenter: it may).

Routing: ``token_aware`` sends a call to a replica of its partition (else to any replica);
``local_dc`` keeps coordinators in that datacenter; ``allow_remote_dc`` lets a call use a
coordinator in another datacenter when none of the local ones can be tried (default: refused
with ``Unavailable``) — except at LOCAL_QUORUM, which a remote coordinator would count in its
own datacenter (cassandra-driver's ``allow_remote_dcs_for_local_cl=False``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from epochal.errors import InvalidRequest
from epochal.policies import DefaultRetryPolicy, RetryPolicy
from epochal.routing import Route
from epochal.tcm.consistency import Consistency

__all__ = ["DEFAULT_PROFILE", "ExecutionProfile", "Profiles", "Settings", "default_profile"]

DEFAULT_PROFILE = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionProfile:
    """How a call runs. ``consistency`` is the enum or its name in any case; ``timeout_s``
    bounds the whole call, retries included, and ``attempt_timeout_s`` each attempt."""

    consistency: Consistency | str = Consistency.QUORUM
    timeout_s: float = 10.0
    # How long one attempt waits for its coordinator before the policy is asked about the next
    # (a coordinator answers within its own timeouts, 2 s by default, so one silent for longer
    # is stopped or cut off). A call pinned to a coordinator waits for it the whole timeout.
    attempt_timeout_s: float = 5.0
    retry_policy: RetryPolicy = field(default_factory=DefaultRetryPolicy)
    local_dc: str | None = None
    token_aware: bool = True
    allow_remote_dc: bool = False

    def __post_init__(self) -> None:
        level = Consistency.of(self.consistency)
        object.__setattr__(self, "consistency", level)
        _check_timeout(self.timeout_s)
        _check_timeout(self.attempt_timeout_s)
        if not isinstance(self.retry_policy, RetryPolicy):
            raise InvalidRequest(
                f"retry_policy must be an epochal.RetryPolicy, not {self.retry_policy!r}"
            )
        _check_local(level, self.local_dc)

    @property
    def level(self) -> Consistency:
        """``consistency`` as the enum (it always is one once built)."""
        assert isinstance(self.consistency, Consistency)
        return self.consistency


@dataclass(frozen=True, slots=True)
class Settings:
    """What one call runs with: its profile, with the call's own overrides applied."""

    profile: ExecutionProfile
    consistency: Consistency
    timeout_s: float

    @property
    def route(self) -> Route:
        """How the call is routed. Never to another datacenter at LOCAL_QUORUM: a remote
        coordinator would count it in its own."""
        profile = self.profile
        remote = profile.allow_remote_dc and self.consistency is not Consistency.LOCAL_QUORUM
        return Route(profile.token_aware, profile.local_dc, remote)


class Profiles:
    """A client's profiles by name (``"default"`` always among them)."""

    def __init__(
        self, default: ExecutionProfile, others: Mapping[str, ExecutionProfile] | None = None
    ) -> None:
        self.by_name = {DEFAULT_PROFILE: default, **(others or {})}
        for name, profile in self.by_name.items():
            if not isinstance(profile, ExecutionProfile):
                raise InvalidRequest(f"profile {name!r} is not an ExecutionProfile: {profile!r}")

    @property
    def default(self) -> ExecutionProfile:
        return self.by_name[DEFAULT_PROFILE]

    def resolve(
        self,
        profile: str | None = None,
        consistency: Consistency | str | None = None,
        timeout_s: float | None = None,
        *,
        pinned: bool = False,
    ) -> Settings:
        """The settings of a call naming ``profile`` (None: the default) and overriding its
        ``consistency`` and ``timeout_s`` (None: the profile's). A call ``pinned`` to a
        coordinator may be LOCAL_QUORUM without a local datacenter: the coordinator's is."""
        chosen = self.by_name.get(DEFAULT_PROFILE if profile is None else profile)
        if chosen is None:
            raise InvalidRequest(
                f"no execution profile {profile!r}; the client has {sorted(self.by_name)}"
            )
        level = chosen.level if consistency is None else Consistency.of(consistency)
        if timeout_s is None:
            timeout_s = chosen.timeout_s
        else:
            _check_timeout(timeout_s)
        if not pinned:
            _check_local(level, chosen.local_dc)
        return Settings(chosen, level, timeout_s)


def default_profile(
    consistency: Consistency | str | None,
    timeout_s: float | None,
    retries: int | None,
    retry_policy: RetryPolicy | None,
    local_dc: str | None,
    profiles: Mapping[str, ExecutionProfile] | None,
) -> ExecutionProfile:
    """A client's default profile: ``profiles["default"]``, else one made of the client's
    keyword arguments (given both, refused)."""
    given = {
        "consistency": consistency,
        "timeout_s": timeout_s,
        "retries": retries,
        "retry_policy": retry_policy,
        "local_dc": local_dc,
    }
    if profiles and "default" in profiles:
        mixed = sorted(name for name, value in given.items() if value is not None)
        if mixed:
            raise InvalidRequest(
                f"profiles['default'] is the default profile: set {mixed} in it, not beside it"
            )
        return profiles["default"]
    if retries is not None and retry_policy is not None:
        raise InvalidRequest("give retries (the default policy's max_retries) or retry_policy")
    return ExecutionProfile(
        consistency=Consistency.QUORUM if consistency is None else consistency,
        timeout_s=10.0 if timeout_s is None else timeout_s,
        retry_policy=retry_policy or DefaultRetryPolicy(3 if retries is None else retries),
        local_dc=local_dc,
    )


def _check_timeout(timeout_s: float) -> None:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
        raise InvalidRequest(f"a timeout must be a positive number of seconds, not {timeout_s!r}")


def _check_local(level: Consistency, local_dc: str | None) -> None:
    if level is Consistency.LOCAL_QUORUM and not local_dc:
        raise InvalidRequest(
            "LOCAL_QUORUM needs a local datacenter: set local_dc on the client or the execution "
            "profile (a coordinator counts LOCAL_QUORUM in its own datacenter, so without one "
            "the level would count wherever the call landed)"
        )
