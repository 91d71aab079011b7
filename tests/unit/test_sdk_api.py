"""One API, two clients: ``epochal.Client`` (threads) and ``epochal.AsyncClient`` (asyncio) expose
the same public methods with the same signatures (the sync ones are the async ones, blocking);
``epochal`` exports the SDK lazily, so importing a pure package loads neither gRPC nor asyncio;
execution profiles refuse what cannot work with a message that says what would."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys

import pytest

import epochal
from epochal import AsyncClient, Client, Consistency, ExecutionProfile, InvalidRequest
from epochal.policies import NeverRetryPolicy
from epochal.profiles import Profiles
from epochal.routing import Route


def public(cls: type) -> dict[str, object]:
    return {name: value for name, value in vars(cls).items() if not name.startswith("_")} | {
        name: value
        for base in cls.__mro__[1:-1]
        for name, value in vars(base).items()
        if not name.startswith("_")
    }


def test_the_sync_and_async_clients_have_the_same_public_methods_and_signatures() -> None:
    sync, asynchronous = public(Client), public(AsyncClient)
    instance = AsyncClient(["127.0.0.1:1"])
    attributes = {name for name in vars(instance) if not name.startswith("_")}
    assert attributes == {"profiles", "session_hlc"}  # the sync client has them as properties
    assert sorted(sync) == sorted(set(asynchronous) | attributes)
    blocking = Client(["127.0.0.1:1"], consistency="one")
    try:
        assert (blocking.profiles.default.level, blocking.session_hlc) == (Consistency.ONE, 0)
    finally:
        blocking.close()
    for name, attribute in asynchronous.items():
        if name in attributes:
            continue
        mirror = sync[name]
        if isinstance(attribute, property):
            assert isinstance(mirror, property), name
            continue
        assert callable(attribute) and callable(mirror), name
        own = inspect.signature(attribute)  # type: ignore[arg-type]
        if own.return_annotation == "AsyncClient":  # connect returns the client itself
            own = own.replace(return_annotation="Client")
        assert inspect.signature(mirror) == own, name  # type: ignore[arg-type]
        assert not inspect.iscoroutinefunction(mirror), name
        assert inspect.iscoroutinefunction(attribute) == (
            name not in {"table", "endpoints", "suspected"}
        ), name
    for dunder in ("__init__",):
        assert inspect.signature(getattr(Client, dunder)) == inspect.signature(
            getattr(AsyncClient, dunder)
        )
    assert hasattr(Client, "__enter__") and hasattr(Client, "__exit__")
    assert hasattr(AsyncClient, "__aenter__") and hasattr(AsyncClient, "__aexit__")


def test_the_package_exports_the_sdk_lazily_and_a_pure_import_loads_no_grpc() -> None:
    probe = (
        "import json, sys\n"
        "import epochal, epochal.tcm\n"
        "pure = sorted(m for m in ('grpc', 'asyncio', 'epochal.client') if m in sys.modules)\n"
        "epochal.Client\n"
        "print(json.dumps([pure, 'grpc' in sys.modules]))\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    pure, after = json.loads(answer.stdout)
    assert pure == [] and after is True
    assert sorted(epochal.__all__) == sorted(set(epochal.__all__))
    for name in epochal.__all__:
        assert getattr(epochal, name) is not None, name
    assert set(epochal.__all__) <= set(dir(epochal))
    with pytest.raises(AttributeError, match="no attribute 'Cluster'"):
        epochal.Cluster  # noqa: B018


def test_the_old_async_name_says_where_it_went() -> None:
    with pytest.raises(ImportError, match=r"now epochal\.AsyncClient"):
        from epochal.client import Client as _  # noqa: F401


def test_a_call_names_a_profile_and_overrides_its_level_and_timeout() -> None:
    analytics = ExecutionProfile(consistency="one", timeout_s=30, retry_policy=NeverRetryPolicy())
    profiles = Profiles(ExecutionProfile(), {"analytics": analytics})
    assert profiles.resolve().consistency is Consistency.QUORUM
    chosen = profiles.resolve("analytics")
    assert (chosen.consistency, chosen.timeout_s, chosen.profile) == (
        Consistency.ONE,
        30,
        analytics,
    )
    assert profiles.resolve("analytics", "all", 0.5).consistency is Consistency.ALL
    assert profiles.resolve("analytics", None, 0.5).timeout_s == 0.5
    with pytest.raises(
        InvalidRequest,
        match=r"no execution profile 'olap'; the client has \['analytics', 'default'\]",
    ):
        profiles.resolve("olap")
    for bad in (0, -1, float("nan"), "5", True):
        with pytest.raises(InvalidRequest, match="a timeout must be a positive number"):
            profiles.resolve(None, None, bad)  # type: ignore[arg-type]


def test_local_quorum_needs_a_local_datacenter() -> None:
    with pytest.raises(InvalidRequest, match="LOCAL_QUORUM needs a local datacenter"):
        ExecutionProfile(consistency="local_quorum")
    with pytest.raises(InvalidRequest, match="LOCAL_QUORUM needs a local datacenter"):
        Profiles(ExecutionProfile()).resolve(None, Consistency.LOCAL_QUORUM)
    pinned = Profiles(ExecutionProfile()).resolve(None, "LOCAL_QUORUM", pinned=True)
    assert pinned.consistency is Consistency.LOCAL_QUORUM  # the pinned coordinator's datacenter
    local = Profiles(ExecutionProfile(local_dc="dc1"))
    assert local.resolve(None, "LOCAL_QUORUM").consistency is Consistency.LOCAL_QUORUM
    with pytest.raises(InvalidRequest, match="LOCAL_QUORUM needs a local datacenter"):
        AsyncClient(["127.0.0.1:1"], consistency="LOCAL_QUORUM")


def test_a_client_takes_its_default_profile_from_its_arguments_or_the_profiles_not_both() -> None:
    client = AsyncClient(["127.0.0.1:1"], consistency="all", timeout_s=3, retries=0)
    default = client.profiles.default
    assert (default.consistency, default.timeout_s) == (Consistency.ALL, 3)
    given = ExecutionProfile(consistency="one")
    assert AsyncClient(["127.0.0.1:1"], profiles={"default": given}).profiles.default is given
    with pytest.raises(InvalidRequest, match=r"set \['timeout_s'\] in it, not beside it"):
        AsyncClient(["127.0.0.1:1"], timeout_s=3, profiles={"default": given})
    with pytest.raises(InvalidRequest, match="give retries"):
        AsyncClient(["127.0.0.1:1"], retries=1, retry_policy=NeverRetryPolicy())
    with pytest.raises(InvalidRequest, match="a list of replica addresses"):
        AsyncClient("127.0.0.1:1")
    with pytest.raises(InvalidRequest, match=r"retry_policy must be an epochal\.RetryPolicy"):
        ExecutionProfile(retry_policy=3)  # type: ignore[arg-type]


def test_local_quorum_never_goes_to_another_datacenter() -> None:
    anywhere = ExecutionProfile(local_dc="dc1", allow_remote_dc=True, token_aware=False)
    profiles = Profiles(anywhere)
    assert profiles.resolve(None, "QUORUM").route == Route(False, "dc1", True)
    assert profiles.resolve(None, "LOCAL_QUORUM").route == Route(False, "dc1", False)


def test_a_client_refuses_calls_before_connect_and_after_close() -> None:
    client = AsyncClient(["127.0.0.1:1"])
    with pytest.raises(InvalidRequest, match="not connected: call connect"):
        client.table("ks", "t")
    asyncio.run(client.close())
    with pytest.raises(InvalidRequest, match="closed") as closed:
        asyncio.run(client.refresh())
    assert closed.value.rule == "closed"
    blocking = Client(["127.0.0.1:1"])
    blocking.close()
    blocking.close()  # again: nothing
    with pytest.raises(InvalidRequest, match="this client is closed"):
        blocking.read("ks", "t", {"k": 1})
