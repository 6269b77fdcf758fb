"""The ``PruneJobs`` RPC: administrators remove finished jobs now (audited)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import grpc

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.identity import Permission
from airlock.jobs import PruneSummary

from . import _access as access
from . import _grpc_errors as errors
from ._callers import caller, current_call
from ._pruning import Pruner
from ._retention import Cutoffs


async def prune_jobs(
    pruner: Pruner, request: cpb.PruneJobsRequest, context: grpc.aio.ServicerContext
) -> cpb.PruneJobsResponse:
    """Remove (dry: count) the finished jobs due under the request (or the configured
    retention); the audit log is left to its own retention."""
    try:
        access.require(caller(), Permission.ADMIN, "prune finished jobs")
    except access.PermissionDenied as e:
        await errors.refuse(context, e)
    call = current_call()
    call.target, call.tenant = "jobs", request.tenant or "*"
    tenant = request.tenant or None
    if request.HasField("older_than"):
        older_than = timedelta(milliseconds=wire.duration_from_proto(request.older_than))
        if older_than <= timedelta(0):
            await errors.invalid(context, [wire.Problem("older_than", "must be positive")])
        cutoffs = Cutoffs(default=pruner.now() - older_than, only=tenant)
    else:
        cutoffs = dataclasses.replace(pruner.cutoffs(tenant), audit=None)
    report = await pruner.prune(cutoffs, dry_run=request.dry_run)
    summary = PruneSummary(
        trees=len(report.roots),
        jobs=report.jobs,
        events=report.events,
        files=report.files,
        bytes=report.bytes,
        checkpoints=report.checkpoints,
        signals=report.signals,
        dry_run=request.dry_run,
        more=request.dry_run and report.more,
    )
    when = f"older than {older_than}" if request.HasField("older_than") else "as configured"
    call.detail = (
        f"{'dry run: ' if request.dry_run else ''}{when}: {summary.jobs} jobs, {summary.bytes} bytes"
    )
    return summary.to_proto()
