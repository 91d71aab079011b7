"""The span table's columns: which attribute each is, and its type.

Names come from ``epochal.telemetry.attributes`` (the names the services wrote), never retyped.
A span attribute ``epochal.<what>`` becomes column ``<what>`` with dots as underscores
(``epochal.replicas.contacted`` → ``replicas_contacted``), ``rpc.grpc.status_code`` becomes
``grpc_status_code`` and ``epochal.error`` (the error's class) ``error_class``. Resource
attributes are ``service``, ``service_instance``, ``service_version``, ``resource_node``,
``datacenter`` and ``rack``.

The types are the ones the services write (the integration test checks every attribute of a real
cluster's spans against them): integers, booleans, lists of strings; everything else a string.
A value that is not of its column's type reads as null there; an application's own attribute is
in the ``attributes`` map (every attribute, as text) and nowhere else.
"""

from __future__ import annotations

from epochal.telemetry import attributes as attr

RESOURCE_COLUMNS: dict[str, str] = {
    attr.SERVICE_NAME: "service",
    attr.SERVICE_INSTANCE: "service_instance",
    attr.SERVICE_VERSION: "service_version",
    attr.NODE_ID: "resource_node",
    attr.DATACENTER: "datacenter",
    attr.RACK: "rack",
}

INTEGER = frozenset(
    {
        attr.EPOCH,
        attr.TOKEN,
        attr.REQUEST_BYTES,
        attr.ROWS,
        attr.STATUS_CODE,
        attr.ATTEMPT,
        attr.ATTEMPTS,
        attr.MUTATIONS,
        attr.SLOT,
        attr.BATCH_SIZE,
        attr.ENTRIES,
        attr.SINCE_EPOCH,
        attr.LOW_BOUND,
        attr.UNRECONCILED,
        attr.LEASE_TOKEN,
        attr.RECONCILIATION_TIME,
        attr.DELIVERED,
        attr.DELIVERED_BYTES,
        attr.COLLECTED,
        attr.COHORT_DELIVERED_BYTES,
        attr.COHORT_HIGH,
        attr.COHORT_FOLDED,
        attr.CELLS,
        attr.RECONCILED,
        attr.REPAIRED_MUTATIONS,
        attr.REPAIRED_CELLS,
        attr.SUMMARY_ROUNDS,
        attr.NODES,
        attr.FROM_EPOCH,
        attr.TO_EPOCH,
        attr.REACHED_EPOCH,
    }
)
BOOLEAN = frozenset(
    {attr.FORWARDED, attr.DUPLICATE, attr.REPAIR, attr.SNAPSHOT, attr.SUMMARIES_AGREED}
)
STRING_LIST = frozenset(
    {
        attr.REPLICAS_CONTACTED,
        attr.REPLICAS_ANSWERED,
        attr.UNREACHABLE,
        attr.COHORTS,
        attr.COHORT_MEMBERS,
        attr.MESSAGES,
        attr.DIFFERING_LOGS,
        attr.BEHIND,
    }
)


# Attributes whose plain column name would say something else (``error`` is the table's flag of
# a failed span).
RENAMED = {attr.STATUS_CODE: "grpc_status_code", attr.ERROR_CLASS: "error_class"}


def span_attribute_names() -> list[str]:
    """Every span attribute name the attributes module defines (``epochal.*`` and the gRPC
    status code), sorted; resource names excluded."""
    names = {
        value
        for key, value in vars(attr).items()
        if key.isupper()
        and isinstance(value, str)
        and (value.startswith("epochal.") or value == attr.STATUS_CODE)
    }
    return sorted(names - (set(RESOURCE_COLUMNS) - {attr.NODE_ID}))


def column_of(name: str) -> str:
    """The span table's column for span attribute ``name``."""
    if name in RENAMED:
        return RENAMED[name]
    return name.removeprefix("epochal.").replace(".", "_")


def type_of(name: str) -> str:
    """``long``, ``boolean``, ``array<string>`` or ``string``: the column's Spark SQL type."""
    if name in INTEGER:
        return "long"
    if name in BOOLEAN:
        return "boolean"
    if name in STRING_LIST:
        return "array<string>"
    return "string"
