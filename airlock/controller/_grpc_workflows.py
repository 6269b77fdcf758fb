"""The QueryWorkflow RPC: a read-only answer about one workflow of the caller's tenant.

Tenant-scoped as SignalWorkflow is: the workflow named is the caller's tenant's (another
tenant's of the same name is another workflow, and answers NOT_FOUND as one that never
existed); a reader sees all of its jobs, a submitter without ``jobs.read`` only their own."""

from __future__ import annotations

from decimal import Decimal

import grpc
from pydantic import JsonValue

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.errors import ConfigError
from airlock.jobs import JobFilter

from . import _access as access
from . import _grpc_errors as errors
from ._callers import caller, current_call
from ._service import JobService
from ._tenant_state import workflow_key
from ._workflow_query import QUERY_TYPES, UnknownQuery, WorkflowFacts, answer

#: The most jobs of one workflow an answer covers (newest first).
MAX_JOBS = 1000


def read_query(request: cpb.QueryWorkflowRequest) -> JsonValue:
    """The query's params.

    Raises:
        MalformedMessage: every problem (workflow, query_type, params).
    """
    problems = errors.required(request, "workflow", "query_type")
    params: JsonValue = None
    try:
        params = wire.json_from_proto(request.params, present=request.HasField("params"))
    except wire.MalformedMessage as e:
        problems += e.under("params").problems
    if request.query_type and request.query_type not in QUERY_TYPES:
        problems.append(wire.Problem("query_type", f"must be one of {', '.join(QUERY_TYPES)}"))
    if problems:
        raise wire.MalformedMessage(problems=problems)
    return params


async def facts_of(service: JobService, workflow: str) -> WorkflowFacts:
    """What the caller may see of its tenant's ``workflow``.

    Raises:
        PermissionDenied: the caller may not list jobs.
    """
    principal = caller()
    where = access.scoped_filter(
        principal, JobFilter(workflow=workflow, tenant=principal.tenant, limit=MAX_JOBS)
    )
    jobs = await service.find(where)
    signals = await service.store.signals(workflow_key(principal.tenant, workflow))
    quotas = await service.quotas.tenant_use(principal.tenant)

    def default_max_cost(agent: str) -> Decimal | None:
        try:
            return service.runner.agent(agent).spec.defaults.max_cost
        except ConfigError:
            return None

    trees: list[JsonValue] = []
    for job in jobs:  # the budget of each tree the workflow's roots head, spent as of now
        use = (await service.with_tree_budget(job)).tree_budget
        if use is not None:
            trees.append({"root": job.id, **use.model_dump(mode="json")})
    return WorkflowFacts(workflow, jobs, signals, quotas, default_max_cost, trees)


async def query_workflow(
    service: JobService, request: cpb.QueryWorkflowRequest, context: grpc.aio.ServicerContext
) -> cpb.QueryWorkflowResponse:
    """Answer QueryWorkflow (INVALID_ARGUMENT, PERMISSION_DENIED or NOT_FOUND otherwise)."""
    try:
        params = read_query(request)
    except wire.MalformedMessage as e:
        return await errors.invalid(context, e.problems)
    current_call().target = request.workflow
    try:
        facts = await facts_of(service, request.workflow)
    except access.PermissionDenied as e:
        return await errors.refuse(context, e)
    if not facts.exists:
        message = f"no workflow {request.workflow!r}: no job or signal of it"
        return await errors.fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", message)
    try:
        result = answer(request.query_type, params, facts)
    except UnknownQuery as e:  # pragma: no cover - read_query refused it
        return await errors.invalid(context, [wire.Problem("query_type", str(e))])
    return cpb.QueryWorkflowResponse(result=wire.json_to_proto(result))
