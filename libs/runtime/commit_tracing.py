"""A service's own commit to the CMS in a span of its own (``replica.commit``,
``reconciler.commit``): the CMS's ``cms.commit`` is its child, so the trace — and the dependency
graph the analytics job draws from it — crosses from the service to the CMS. A commit made
outside any trace (a registration, a step of a topology operation, a lease grant) starts one."""

from __future__ import annotations

import asyncio

from epochal.cms_client import CMSClient, Committed
from epochal.tcm.transformations import Transformation
from epochal.telemetry import attributes as attr
from epochal.telemetry import span
from epochal.telemetry.context import cancelled, failed


async def traced_commit(
    cms: CMSClient, name: str, transformation: Transformation, entry_id: str
) -> Committed:
    """``cms.commit(transformation, entry_id)`` in a span named ``name``."""
    with span(name) as traced:
        traced.set_attribute(attr.TRANSFORMATION, transformation.kind)
        traced.set_attribute(attr.ENTRY_ID, entry_id)
        try:
            committed = await cms.commit(transformation, entry_id=entry_id)
        except asyncio.CancelledError:
            cancelled(traced)
            raise
        except Exception as error:
            failed(traced, error)
            raise
        traced.set_attributes(
            {
                attr.EPOCH: committed.epoch,
                attr.DUPLICATE: committed.duplicate,
                attr.ATTEMPTS: committed.attempts,
                attr.OUTCOME: attr.OK,
            }
        )
        return committed
