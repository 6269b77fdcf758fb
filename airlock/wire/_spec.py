"""airlock AgentSpec ↔ proto."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import ValidationError

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.spec import AgentSpec, McpServerSpec
from layer0 import decimal_to_str

from ._enums import CONTEXT_STRATEGY, HOOK_KIND, MCP_TRANSPORT, PROVIDER_KIND, RISK_CLASS, TOOL_CHOICE
from ._primitives import json_field, json_to_proto, seconds_from_proto, seconds_to_proto
from ._problems import MalformedMessage, Problem, validation_problems
from ._reserved import reserved_problems
from ._turn import config_from_proto, config_to_proto

_T = TypeVar("_T")

#: The AgentSpec/ProviderSpec fields this module carries; a test fails when the models grow.
AGENT_SPEC_FIELDS = frozenset(
    (
        "name",
        "provider",
        "system",
        "tools",
        "tool_options",
        "context",
        "defaults",
        "hooks",
        "limits",
        "approval",
        "mcp_servers",
        "memory",
        "artifacts",
        "middleware",
        "turn",
    )
)
PROVIDER_SPEC_FIELDS = frozenset(
    (
        "kind",
        "model",
        "base_url",
        "api_key_env",
        "script",
        "max_tokens",
        "temperature",
        "timeout_s",
        "max_retries",
        "price_per_mtok_in",
        "price_per_mtok_out",
        "compaction",
        "tool_choice_first",
        "tool_choice_after_failure",
        "parallel_tool_calls",
        "thinking",
        "reasoning_effort",
        "response_format",
        "name",
        "options",
    )
)
MCP_SERVER_FIELDS = frozenset(
    ("name", "transport", "command", "env", "url", "allowed_tools", "startup_timeout_s", "call_timeout_s")
)


def spec_to_proto(spec: AgentSpec) -> pb.AgentSpec:
    """AgentSpec → proto (every field set explicitly, defaults included)."""
    message = pb.AgentSpec(
        name=spec.name,
        provider=_provider_to_proto(spec),
        system=spec.system,
        tools=list(spec.tools),
        context=pb.ContextSpec(
            strategy=CONTEXT_STRATEGY.to_proto(spec.context.strategy),
            max_tokens=spec.context.max_tokens,
            keep_last=spec.context.keep_last,
            name=spec.context.name,
            options=json_to_proto(spec.context.options) if spec.context.options else None,
        ),
        defaults=config_to_proto(spec.defaults),
        tool_options=[
            pb.ToolOptions(tool=tool, options=json_to_proto(options))
            for tool, options in spec.tool_options.items()
        ],
        hooks=[
            pb.HookSpec(kind=HOOK_KIND.to_proto(h.name), options=json_to_proto(h.options), custom=h.custom)
            for h in spec.hooks
        ],
        middleware=[
            pb.MiddlewareSpec(name=m.name, options=json_to_proto(m.options)) for m in spec.middleware
        ],
        limits=pb.LoopLimits(
            circuit_breaker_threshold=spec.limits.circuit_breaker_threshold,
            stuck_threshold=spec.limits.stuck_threshold,
            budget_warnings=json_to_proto(list(spec.limits.budget_warnings)),
        ),
        mcp_servers=[_mcp_to_proto(server) for server in spec.mcp_servers],
        memory=pb.MemorySpec(context_keys=spec.memory.context_keys),
        artifacts=pb.ArtifactSpec(
            globs=pb.StringList(values=spec.artifacts.globs),
            max_files=spec.artifacts.max_files,
            max_file_bytes=spec.artifacts.max_file_bytes,
            max_total_bytes=spec.artifacts.max_total_bytes,
        ),
    )
    if spec.approval is not None:
        risks = [RISK_CLASS.to_proto(risk) for risk in spec.approval.risks]
        message.approval.CopyFrom(pb.ApprovalGate(tools=spec.approval.tools, risks=risks))
    if spec.turn is not None:
        message.turn.CopyFrom(
            pb.CustomTurn(entry_point=spec.turn.entry_point, options=json_to_proto(spec.turn.options))
        )
    return message


def _provider_to_proto(spec: AgentSpec) -> pb.ProviderSpec:
    p = spec.provider
    provider = pb.ProviderSpec(
        kind=PROVIDER_KIND.to_proto(p.kind),
        script=json_to_proto(p.script),
        max_tokens=p.max_tokens,
        timeout=seconds_to_proto(p.timeout_s),
        max_retries=p.max_retries,
        tool_choice_first=TOOL_CHOICE.to_proto(p.tool_choice_first),
        tool_choice_after_failure=TOOL_CHOICE.to_proto(p.tool_choice_after_failure),
    )
    optional = (
        "model",
        "base_url",
        "api_key_env",
        "temperature",
        "parallel_tool_calls",
        "reasoning_effort",
        "name",
    )
    for name in optional:
        if getattr(p, name) is not None:
            setattr(provider, name, getattr(p, name))
    for name in ("price_per_mtok_in", "price_per_mtok_out"):
        price = getattr(p, name)
        if price is not None:
            setattr(provider, name, decimal_to_str(price))
    if p.compaction is not None:
        provider.compaction.CopyFrom(pb.ServerCompaction(trigger_tokens=p.compaction.trigger_tokens))
    if p.thinking is not None:
        provider.thinking.CopyFrom(pb.ThinkingOptions(budget_tokens=p.thinking.budget_tokens))
    fmt = p.response_format
    if fmt is not None:
        provider.response_format.type = fmt.type
        if fmt.json_schema is not None:
            provider.response_format.json_schema.CopyFrom(json_to_proto(fmt.json_schema))
        for name in ("name", "strict"):
            if getattr(fmt, name) is not None:
                setattr(provider.response_format, name, getattr(fmt, name))
    if p.options:
        provider.options.CopyFrom(json_to_proto(p.options))
    return provider


def _response_format(message: pb.ResponseFormat, problems: _Problems) -> dict[str, Any]:
    fmt: dict[str, Any] = {"type": message.type, **_present(message, ("name", "strict"))}
    if message.HasField("json_schema"):
        fmt["json_schema"] = problems.read("provider.response_format", json_field, message, "json_schema")
    return fmt


def _mcp_to_proto(server: McpServerSpec) -> pb.McpServer:
    message = pb.McpServer(
        name=server.name,
        transport=MCP_TRANSPORT.to_proto(server.transport),
        command=server.command,
        env=server.env,
        startup_timeout=seconds_to_proto(server.startup_timeout_s),
        call_timeout=seconds_to_proto(server.call_timeout_s),
    )
    if server.url is not None:
        message.url = server.url
    if server.allowed_tools is not None:
        message.allowed_tools.CopyFrom(pb.StringList(values=server.allowed_tools))
    return message


def _mcp_from_proto(message: pb.McpServer, path: str, problems: _Problems) -> dict[str, Any]:
    server: dict[str, Any] = {
        "name": message.name,
        "transport": problems.read(f"{path}.transport", MCP_TRANSPORT.from_proto, message.transport),
        "command": list(message.command),
        "env": dict(message.env),
    }
    server.update(_present(message, ("url",)))
    timeouts = {"startup_timeout": "startup_timeout_s", "call_timeout": "call_timeout_s"}
    server.update(_durations(message, timeouts, path, problems))
    if message.HasField("allowed_tools"):
        server["allowed_tools"] = list(message.allowed_tools.values)
    return server


def _present(message: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(message, name) for name in names if message.HasField(name)}


def _counts(message: Any, names: Iterable[str]) -> dict[str, Any]:
    """The counts and caps of ``names`` that are not 0 (0, like unset, means the default)."""
    return {name: getattr(message, name) for name in names if getattr(message, name)}


def _durations(message: Any, names: dict[str, str], path: str, problems: _Problems) -> dict[str, float]:
    """The Durations of ``names`` (wire name → spec field in seconds) that are set and not
    zero (unset or zero: the default); a negative one is a problem at ``path.<name>``."""
    found: dict[str, float] = {}
    for name, field in names.items():
        if not message.HasField(name):
            continue
        duration = getattr(message, name)
        if duration.ToNanoseconds() < 0:
            problems.add(f"{path}.{name}", "must not be negative (unset or zero: the default)")
        elif duration.ToNanoseconds():
            found[field] = seconds_from_proto(duration)
    return found


class _Problems:
    """Collects the problems of a message instead of stopping at the first."""

    def __init__(self) -> None:
        self.found: list[Problem] = []

    def read(self, path: str, read: Callable[..., _T], *args: Any) -> _T | None:
        """``read(*args)``, or None with its problems recorded under ``path``."""
        try:
            return read(*args)
        except MalformedMessage as e:
            self.found.extend(e.under(path).problems)
            return None

    def add(self, path: str, text: str) -> None:
        self.found.append(Problem(path, text))


def _provider(p: pb.ProviderSpec, problems: _Problems) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "kind": problems.read("provider.kind", PROVIDER_KIND.from_proto, p.kind),
        "script": problems.read("provider", json_field, p, "script"),
    }
    provider.update(_present(p, ("model", "base_url", "api_key_env", "temperature", "max_retries")))
    provider.update(_present(p, ("price_per_mtok_in", "price_per_mtok_out", "parallel_tool_calls", "name")))
    if p.HasField("options"):
        provider["options"] = problems.read("provider", json_field, p, "options")
    provider.update(_counts(p, ("max_tokens",)))
    provider.update(_durations(p, {"timeout": "timeout_s"}, "provider", problems))
    for name in ("tool_choice_first", "tool_choice_after_failure"):
        if getattr(p, name):  # UNSPECIFIED: the default
            provider[name] = problems.read(f"provider.{name}", TOOL_CHOICE.from_proto, getattr(p, name))
    if p.HasField("compaction"):
        provider["compaction"] = _counts(p.compaction, ("trigger_tokens",))
    if p.HasField("thinking"):
        provider["thinking"] = {"budget_tokens": p.thinking.budget_tokens}
    if p.HasField("reasoning_effort"):
        provider["reasoning_effort"] = p.reasoning_effort
    if p.HasField("response_format"):
        provider["response_format"] = _response_format(p.response_format, problems)
    return provider


def _tool_options(message: pb.AgentSpec, problems: _Problems) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for i, entry in enumerate(message.tool_options):
        if entry.tool in options:
            problems.add(f"tool_options[{i}].tool", f"{entry.tool!r} is listed twice")
        options[entry.tool] = problems.read(f"tool_options[{i}]", json_field, entry, "options")
    return options


def spec_from_proto(message: pb.AgentSpec) -> AgentSpec:
    """proto → AgentSpec, validated like any AgentSpec.

    A count, cap or Duration that is 0 (or unset) means its default.

    Raises:
        MalformedMessage: every problem found (a value at a number this version reserves, a
            missing provider, an unspecified or unknown enum value, invalid JSON, a negative
            Duration, a value that does not validate), each located by its path in the
            AgentSpec (``provider.kind``, ``context.keep_last``, …).
    """
    problems = _Problems()
    problems.found.extend(reserved_problems(message))
    data: dict[str, Any] = {
        "name": message.name,
        "system": message.system,
        "tools": list(message.tools),
        "tool_options": _tool_options(message, problems),
        "hooks": [
            {
                "name": problems.read(f"hooks[{i}].kind", HOOK_KIND.from_proto, h.kind),
                "options": problems.read(f"hooks[{i}]", json_field, h, "options") or {},
                **_present(h, ("custom",)),
            }
            for i, h in enumerate(message.hooks)
        ],
        "middleware": [
            {"name": m.name, "options": problems.read(f"middleware[{i}]", json_field, m, "options") or {}}
            for i, m in enumerate(message.middleware)
        ],
        "mcp_servers": [
            _mcp_from_proto(server, f"mcp_servers[{i}]", problems)
            for i, server in enumerate(message.mcp_servers)
        ],
    }
    if message.HasField("provider"):
        data["provider"] = _provider(message.provider, problems)
    else:
        problems.add("provider", "required")
    if message.HasField("defaults"):
        data["defaults"] = problems.read("defaults", config_from_proto, message.defaults)
    data.update(_parts(message, problems))
    if problems.found:
        raise MalformedMessage(problems=problems.found)
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as e:
        raise MalformedMessage(problems=validation_problems(e)) from e


def _parts(message: pb.AgentSpec, problems: _Problems) -> dict[str, Any]:
    """The context, limits, memory, artifacts and approval sections that are present."""
    data: dict[str, Any] = {}
    if message.HasField("context"):
        c = message.context
        context = _counts(c, ("max_tokens", "keep_last"))
        if c.HasField("strategy"):
            context["strategy"] = problems.read("context.strategy", CONTEXT_STRATEGY.from_proto, c.strategy)
        context.update(_present(c, ("name",)))
        if c.HasField("options"):
            context["options"] = problems.read("context", json_field, c, "options")
        data["context"] = context
    if message.HasField("turn"):
        t = message.turn
        options = problems.read("turn", json_field, t, "options") or {}
        data["turn"] = {"entry_point": t.entry_point, "options": options}
    if message.HasField("limits"):
        limits = _counts(message.limits, ("circuit_breaker_threshold", "stuck_threshold"))
        if message.limits.HasField("budget_warnings"):
            limits["budget_warnings"] = problems.read("limits", json_field, message.limits, "budget_warnings")
        data["limits"] = limits
    if message.HasField("memory"):
        data["memory"] = {"context_keys": list(message.memory.context_keys)}
    if message.HasField("artifacts"):
        a = message.artifacts
        artifacts = _counts(a, ("max_files", "max_file_bytes", "max_total_bytes"))
        if a.HasField("globs"):
            artifacts["globs"] = list(a.globs.values)
        data["artifacts"] = artifacts
    if message.HasField("approval"):
        risks = [
            problems.read(f"approval.risks[{i}]", RISK_CLASS.from_proto, risk)
            for i, risk in enumerate(message.approval.risks)
        ]
        data["approval"] = {"tools": list(message.approval.tools), "risks": risks}
    return data
