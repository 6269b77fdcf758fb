"""AgentSpec and friends: the declarative, serializable blueprint of an agent.

It crosses the wire to the runner, so it is plain data: validated, with unknown keys
rejected (a typo in a YAML file fails loudly). It names tools, a provider, hooks and a
context strategy; :mod:`airlock.build` turns it into a running ``NeuronTurn``. This module
imports nothing of airlock but its errors, so every layer may describe an agent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from airlock.errors import shorten
from layer0 import TurnConfig, TurnInput

PROVIDER_KINDS = ("anthropic", "openai_compat", "scripted", "command", "custom")
#: Tools the turn itself implements: calling one declares an effect (never run in the sandbox).
EFFECT_TOOLS = ("write_memory", "delete_memory", "delegate", "handoff", "signal")
#: Tools that run inside the sandbox (their implementations: ``airlock.tools``).
SANDBOX_TOOLS = ("bash", "read_file", "write_file", "list_files", "edit_file", "http_request", "calculator")
#: Tools the turn answers from the read-only state snapshot it was given (never written).
MEMORY_TOOLS = ("read_memory", "search_memory")
#: Every built-in tool name an AgentSpec may list (besides custom tools by import path).
TOOL_NAMES = SANDBOX_TOOLS + EFFECT_TOOLS + MEMORY_TOOLS
#: A custom tool named by import path: ``package.module:function``.
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
#: An MCP server's name: its tools are offered as ``<server>.<tool>``.
MCP_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
#: Risk classes a tool may declare; an approval gate may name them.
RISK_CLASSES = ("destructive", "external")
#: The hooks a spec may enable by name (``HookSpec.name``; built by ``airlock.build``).
HOOK_NAMES = ("budget", "logging", "custom")
#: The entry-point groups a sandbox image's packages register extensions in, by what they extend.
EXTENSION_GROUPS = {
    "provider": "airlock.providers",
    "hook": "airlock.hooks",
    "context strategy": "airlock.context_strategies",
    "tool middleware": "airlock.tool_middleware",
    "turn": "airlock.turns",
}
#: An extension's entry-point name.
EXTENSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: The risk classes of the built-in tools: ``destructive`` changes what the sandbox or the
#: agent's state holds, ``external`` reaches beyond the sandbox (the network, other agents).
TOOL_RISKS: dict[str, tuple[str, ...]] = {
    "bash": ("destructive", "external"),
    "write_file": ("destructive",),
    "edit_file": ("destructive",),
    "http_request": ("external",),
    "write_memory": ("destructive",),
    "delete_memory": ("destructive",),
    "delegate": ("external",),
    "handoff": ("external",),
    "signal": ("external",),
}
#: The session-scope state key holding a session's conversation history.
HISTORY_KEY = "history"
#: The turn input's metadata key naming the workflow the turn belongs to (the controller sets
#: it to the job's workflow; its ``workflow`` and ``agent`` memory scopes are that workflow's).
WORKFLOW_METADATA = "workflow"


def named_workflow(metadata: object) -> str | None:
    """The workflow a turn input's ``metadata`` names (``metadata.workflow``, a non-empty
    string), or None."""
    named = metadata.get(WORKFLOW_METADATA) if isinstance(metadata, dict) else None
    return named if isinstance(named, str) and named else None


#: The most values an agent spec's YAML may expand to, counting each use of an alias anew.
_MAX_SPEC_VALUES = 200_000
#: The largest count the wire carries (its counts are uint32).
UINT32_MAX = 2**32 - 1


def _names_a_file(source: str) -> bool:
    """Whether ``source`` is the path of an existing file (a name too long for the file
    system, or with a NUL byte, names none)."""
    try:
        return Path(source).is_file()
    except (OSError, ValueError):
        return False


def _expands_beyond(data: Any, limit: int) -> bool:
    """Whether ``data`` (parsed YAML, whose aliases share objects and may form cycles) holds
    more than ``limit`` values when every alias is counted anew; stops counting at ``limit``."""
    stack, seen = [data], 0
    while stack:
        seen += 1
        if seen > limit:
            return True
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _extension_name(value: str | None) -> str | None:
    if value is not None and not EXTENSION_NAME.match(value):
        raise ValueError(
            f"extension name {shorten(value, 80)!r} must be 1-64 letters, digits, '_', '.' or '-'"
        )
    return value


def _custom_fields(custom: bool, name: str | None, options: dict[str, JsonValue], what: str) -> None:
    """``name`` is required when ``custom``, and ``name``/``options`` belong to it only."""
    if custom and name is None:
        raise ValueError(f"a custom {what} needs the name of its entry point")
    if not custom and (name is not None or options):
        raise ValueError(f"name and options belong to a custom {what} only")


class ProviderSpec(_Spec):
    """Which model provider, which model, and where to reach it."""

    kind: str
    model: str | None = None
    #: API base URL (e.g. a credential proxy, or a local OpenAI-compatible server).
    base_url: str | None = None
    #: Name of the environment variable holding the API key inside the runner (None: no key,
    #: e.g. when a sidecar proxy injects it).
    api_key_env: str | None = None
    #: Scripted provider only: the recorded conversation (inline) or a path to its file.
    script: str | list[JsonValue] | dict[str, JsonValue] | None = None
    max_tokens: int = Field(default=4096, gt=0, le=UINT32_MAX)
    temperature: float | None = None
    #: Anthropic only: server-side compaction (None: off). Works beside the client-side
    #: context strategies.
    compaction: ServerCompaction | None = None
    #: Request timeout in seconds.
    timeout_s: float = Field(default=120.0, gt=0)
    #: Retries the SDK itself makes on 429/5xx/connection errors before raising (0: none;
    #: the orchestrator's retry policy still applies on top).
    max_retries: int = Field(default=2, ge=0, le=UINT32_MAX)
    #: The ``tool_choice`` of a turn's first model call when tools are offered: ``required``
    #: makes the model act (call a tool) before it may answer; later calls are ``auto``. Small
    #: local models otherwise tend to explain how to do a task instead of doing it.
    tool_choice_first: Literal["auto", "required"] = "auto"
    #: The ``tool_choice`` of the model call after a failed tool step (an error result, or a
    #: command's non-zero ``exit_code``): ``required`` makes the model act on the failure rather
    #: than give up or guess, once (when that call fails too, the model may answer).
    tool_choice_after_failure: Literal["auto", "required"] = "auto"
    #: False: at most one tool call per model reply (``parallel_tool_calls``; the Messages API's
    #: ``disable_parallel_tool_use``). None: the provider's default.
    parallel_tool_calls: bool | None = None
    #: openai_compat only: USD per million prompt / completion tokens (``0`` for a free
    #: local model). Unset: cost is None (unknown), never a guess.
    price_per_mtok_in: Decimal | None = Field(default=None, ge=0)
    price_per_mtok_out: Decimal | None = Field(default=None, ge=0)
    #: anthropic only: extended thinking (None: off). Thinking tokens are billed as output.
    thinking: ThinkingSpec | None = None
    #: openai_compat only: the ``reasoning_effort`` of reasoning models (None: the server's
    #: default). Reasoning tokens are part of the completion tokens (and priced so).
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    #: openai_compat only: constrain the answer to JSON (None: free text).
    response_format: ResponseFormatSpec | None = None
    #: custom only: the entry point's name in ``airlock.providers`` (the image's packages).
    name: str | None = None
    #: custom only: the provider's own options.
    options: dict[str, JsonValue] = Field(default_factory=dict)

    _valid_name = field_validator("name")(_extension_name)

    @model_validator(mode="after")
    def _custom(self) -> Self:
        _custom_fields(self.kind == "custom", self.name, self.options, "provider")
        return self

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider {value!r}; valid providers: {', '.join(PROVIDER_KINDS)}")
        return value

    @model_validator(mode="after")
    def _options_fit_the_kind(self) -> Self:
        for key, kinds in _KIND_OPTIONS.items():
            if getattr(self, key) is not None and self.kind not in kinds:
                raise ValueError(f"{key}: not an option of provider {self.kind!r} (only {', '.join(kinds)})")
        if self.thinking is not None:
            if self.thinking.budget_tokens >= self.max_tokens:
                raise ValueError(
                    f"thinking.budget_tokens: {self.thinking.budget_tokens} must be less than "
                    f"max_tokens ({self.max_tokens})"
                )
            if self.temperature is not None and self.temperature != 1:
                raise ValueError("temperature: must be unset (or 1) when thinking is on")
        return self


class ThinkingSpec(_Spec):
    """Anthropic extended thinking: the model reasons before it answers."""

    #: Tokens the model may spend thinking (at least 1024, less than ``max_tokens``).
    budget_tokens: int = Field(ge=1024, le=UINT32_MAX)


class ResponseFormatSpec(_Spec):
    """The JSON an OpenAI-compatible model must answer with."""

    #: ``json_object``: any JSON object; ``json_schema``: JSON matching ``schema``.
    type: Literal["json_object", "json_schema"]
    #: json_schema: the schema's name (letters, digits, ``_``, ``-``; at most 64).
    name: str | None = None
    #: json_schema: the JSON Schema of the answer.
    json_schema: dict[str, JsonValue] | None = None
    #: json_schema: strict schema adherence (None: the server's default).
    strict: bool | None = None

    @model_validator(mode="after")
    def _schema_fits_the_type(self) -> Self:
        if self.type == "json_schema":
            if self.json_schema is None:
                raise ValueError("response_format.json_schema: required when type is json_schema")
            if self.name is None or not RESPONSE_FORMAT_NAME.match(self.name):
                raise ValueError(
                    f"response_format.name: {self.name!r} must be 1-64 letters, digits, '_' or '-' "
                    "(required when type is json_schema)"
                )
        else:
            extra = [k for k in ("name", "json_schema", "strict") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"response_format.{extra[0]}: only with type json_schema")
        return self


#: The provider options each provider kind takes.
_KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "thinking": ("anthropic", "scripted"),
    "reasoning_effort": ("openai_compat", "scripted"),
    "response_format": ("openai_compat", "scripted"),
}
#: A ``response_format`` schema name.
RESPONSE_FORMAT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ContextSpec(_Spec):
    """How the conversation is kept within the model's window."""

    #: ``causal_cone``: for delegated jobs, the context begins with the turn's causal past in
    #: its job tree (given by the controller), not the whole shared history.
    strategy: Literal["none", "sliding_window", "summarization", "composite", "causal_cone", "custom"] = (
        "none"
    )
    #: Token budget the strategy compacts to.
    max_tokens: int = Field(default=100_000, gt=0, le=UINT32_MAX)
    #: sliding_window: messages kept at the end (tool pairs never split).
    keep_last: int = Field(default=20, gt=0, le=UINT32_MAX)
    #: custom only: the entry point's name in ``airlock.context_strategies``.
    name: str | None = None
    #: custom only: the strategy's own options.
    options: dict[str, JsonValue] = Field(default_factory=dict)

    _valid_name = field_validator("name")(_extension_name)

    @model_validator(mode="after")
    def _custom(self) -> Self:
        _custom_fields(self.strategy == "custom", self.name, self.options, "context strategy")
        return self


class McpServerSpec(_Spec):
    """An MCP server whose tools the agent may call, offered as ``<name>.<tool>``.

    ``stdio``: ``command`` is started inside the sandbox (from its image), confined like the
    bash tool. ``http``: the streamable-HTTP endpoint ``url`` is reached through the sandbox's
    egress proxy, so the agent's network policy governs it; a credential for it is a sidecar
    credential whose route's upstream is the URL's origin (or above it): the backend points
    ``url`` at that credential's proxy, which adds it (the sandbox never holds it).
    """

    name: str
    transport: Literal["stdio", "http"]
    #: stdio: the program and its arguments.
    command: list[str] = Field(default_factory=list)
    #: stdio: extra environment variables of the server process (not secrets).
    env: dict[str, str] = Field(default_factory=dict)
    #: http: the server's MCP endpoint (``http(s)://host[:port]/path``).
    url: str | None = None
    #: The server's tools (their own names, ``fnmatch`` globs) the agent may call; None: all.
    allowed_tools: list[str] | None = None
    #: Seconds to start the server and list its tools.
    startup_timeout_s: float = Field(default=30.0, gt=0)
    #: Seconds one tool call may take.
    call_timeout_s: float = Field(default=120.0, gt=0)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not MCP_SERVER_NAME.match(value):
            raise ValueError(
                f"MCP server name {value!r} must start with a letter and hold only letters, digits, "
                "'_' and '-' (at most 32)"
            )
        return value

    @model_validator(mode="after")
    def _transport_fields(self) -> Self:
        if self.transport == "stdio":
            if not self.command or self.url is not None:
                raise ValueError(f"MCP server {self.name!r}: transport stdio takes a command and no url")
        else:
            if not self.url or self.command or self.env:
                raise ValueError(f"MCP server {self.name!r}: transport http takes a url and no command/env")
            if not re.match(r"^https?://[^/?#]+", self.url):
                raise ValueError(f"MCP server {self.name!r}: url {self.url!r} is not an http(s) URL")
        return self

    def allows(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` (its own name) is offered to the agent."""
        from fnmatch import fnmatchcase

        return self.allowed_tools is None or any(fnmatchcase(tool, p) for p in self.allowed_tools)


class MemorySpec(_Spec):
    """The memory a turn starts with: values of the read-only state snapshot, by key, placed
    before the turn's input (the session's scope first, then the global one)."""

    context_keys: list[str] = Field(default_factory=list)


class ArtifactSpec(_Spec):
    """Files a turn leaves in its workspace that come back as the job's artifacts: paths
    relative to the workspace matching ``globs`` (``**`` spans directories). Regular files
    only, never through a symbolic link; more than a cap refuses the whole set (never a
    silent cut)."""

    globs: list[str] = Field(default_factory=lambda: ["out/**"])
    max_files: int = Field(default=100, gt=0, le=UINT32_MAX)
    max_file_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    max_total_bytes: int = Field(default=50 * 1024 * 1024, gt=0)

    @field_validator("globs")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for glob in value:
            if not glob or glob.startswith("/") or ".." in glob.split("/"):
                raise ValueError(f"artifact glob {glob!r} must be relative to the workspace, without '..'")
        return value


class ServerCompaction(_Spec):
    """Anthropic only: the API's server-side context compaction (``context_management``)."""

    #: Input tokens at which the API compacts the conversation.
    trigger_tokens: int = Field(default=150_000, ge=50_000, le=UINT32_MAX)


class HookSpec(_Spec):
    """A hook to enable by name, with its options (e.g. ``{"name": "budget", "max_cost": "1.00"}``),
    or a hook of the image's packages by its entry point (``{"custom": "audit"}``)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    #: The entry point's name in ``airlock.hooks`` (``name`` is then ``custom``).
    custom: str | None = None

    _valid_custom = field_validator("custom")(_extension_name)

    @model_validator(mode="before")
    @classmethod
    def _custom_names_it(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("custom") is not None and "name" not in data:
            return {**data, "name": "custom"}
        return data

    @model_validator(mode="after")
    def _custom_needs_entry_point(self) -> Self:
        if (self.name == "custom") != (self.custom is not None):
            raise ValueError("a custom hook names its entry point (custom: NAME), and only it does")
        return self


class MiddlewareSpec(_Spec):
    """A tool middleware of the image's packages (entry point in ``airlock.tool_middleware``)."""

    name: str
    options: dict[str, JsonValue] = Field(default_factory=dict)

    _valid_name = field_validator("name")(_extension_name)


class TurnSpec(_Spec):
    """A turn class of the image's packages (entry point in ``airlock.turns``), built by the
    runner in place of NeuronTurn."""

    entry_point: str
    options: dict[str, JsonValue] = Field(default_factory=dict)

    _valid_name = field_validator("entry_point")(_extension_name)


class LoopLimits(_Spec):
    """Loop guards beyond TurnConfig."""

    #: Consecutive failed tool calls that trip the circuit breaker.
    circuit_breaker_threshold: int = Field(default=5, gt=0, le=UINT32_MAX)
    #: Identical tool calls (same name and input) in a row that count as stuck.
    stuck_threshold: int = Field(default=4, gt=1, le=UINT32_MAX)
    #: Fractions of ``max_cost`` at which the turn emits a budget warning (each once).
    budget_warnings: list[float] = Field(default_factory=lambda: [0.5, 0.8])

    @field_validator("budget_warnings")
    @classmethod
    def _fractions(cls, value: list[float]) -> list[float]:
        if any(not 0 < f < 1 for f in value):
            raise ValueError("budget warnings are fractions of max_cost, each between 0 and 1")
        return sorted(set(value))


class ApprovalGate(_Spec):
    """Which tool calls wait for a person's approval before they run: a call matches by its
    tool's name (``fnmatch`` globs: ``bash``, ``*_file``) or by a risk class the tool
    declares (``destructive``, ``external``). Who approves, and how, is the controller's
    policy (``airlock.policy.ApprovalPolicy``)."""

    tools: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)

    @field_validator("risks")
    @classmethod
    def _known_risks(cls, value: list[str]) -> list[str]:
        unknown = [r for r in value if r not in RISK_CLASSES]
        if unknown:
            raise ValueError(f"unknown risk class(es) {', '.join(unknown)}; valid: {', '.join(RISK_CLASSES)}")
        return value

    def needs(self, tool: str, risks: Iterable[str] = ()) -> bool:
        """Whether a call of ``tool`` (declaring ``risks``) waits for approval."""
        from fnmatch import fnmatchcase

        return any(fnmatchcase(tool, pattern) for pattern in self.tools) or bool(set(self.risks) & set(risks))


class AgentSpec(_Spec):
    """Everything needed to build a NeuronTurn, as data."""

    name: str = Field(min_length=1)
    provider: ProviderSpec
    system: str = ""
    #: Tool names: sandbox tools (``airlock.tools``), effect tools (write_memory, …), memory
    #: tools (read_memory, search_memory), and custom tools by import path
    #: (``package.module:function``, imported by the runner from the sandbox's image).
    tools: list[str] = Field(default_factory=list)
    #: MCP servers whose tools the agent may call.
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    #: Memory placed in the context at the start of each turn.
    memory: MemorySpec = Field(default_factory=MemorySpec)
    #: Files of the workspace that come back as artifacts.
    artifacts: ArtifactSpec = Field(default_factory=ArtifactSpec)
    #: Per-tool options, keyed by tool name (e.g. ``{"bash": {"timeout_s": 30}}``).
    tool_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    context: ContextSpec = Field(default_factory=ContextSpec)
    #: Defaults applied under any per-turn TurnConfig.
    defaults: TurnConfig = Field(default_factory=TurnConfig)
    hooks: list[HookSpec] = Field(default_factory=list)
    limits: LoopLimits = Field(default_factory=LoopLimits)
    #: Tool calls that wait for a person's approval (None: none do).
    approval: ApprovalGate | None = None
    #: Tool middleware of the image's packages, outermost first.
    middleware: list[MiddlewareSpec] = Field(default_factory=list)
    #: A turn class of the image's packages instead of NeuronTurn (None: NeuronTurn).
    turn: TurnSpec | None = None

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        valid = sorted(TOOL_NAMES)
        unknown = [t for t in value if t not in valid and not IMPORT_PATH.match(t)]
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(unknown)}; valid tools: {', '.join(valid)}, or a custom "
                "tool by import path (package.module:function)"
            )
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, value: list[McpServerSpec]) -> list[McpServerSpec]:
        names = [s.name for s in value]
        if len(set(names)) != len(names):
            raise ValueError("an MCP server name is listed twice")
        return value

    @property
    def custom_tools(self) -> list[str]:
        """The custom tools' import paths, in the order listed."""
        return [t for t in self.tools if t not in TOOL_NAMES]

    def extensions(self) -> list[tuple[str, str]]:
        """The extensions it names, as (what, entry-point name) pairs (what: a key of
        :data:`EXTENSION_GROUPS`), in spec order: provider, context, hooks, middleware, turn."""
        found: list[tuple[str, str]] = []
        if self.provider.name is not None:
            found.append(("provider", self.provider.name))
        if self.context.name is not None:
            found.append(("context strategy", self.context.name))
        found += [("hook", h.custom) for h in self.hooks if h.custom is not None]
        found += [("tool middleware", m.name) for m in self.middleware]
        if self.turn is not None:
            found.append(("turn", self.turn.entry_point))
        return found

    @property
    def reads_memory(self) -> bool:
        """Whether its turn reads memory (a memory tool, or ``memory.context_keys``): only then
        does the state it is given need more than the session's history."""
        return bool(self.memory.context_keys) or any(t in MEMORY_TOOLS for t in self.tools)

    def assured_risks(self, tool: str) -> tuple[str, ...]:
        """The risk classes of ``tool`` known from this spec alone, without asking the sandbox:
        a built-in tool's (:data:`TOOL_RISKS`); ``external`` for a tool of an http MCP server
        (``<server>.<tool>``). None for the rest: a stdio MCP tool's risks come from its
        server's annotations and a custom tool's from its code, both inside the sandbox. What
        the controller re-checks an approval gate with; a gate that must hold for those tools
        names them (``approval.tools``)."""
        if tool in TOOL_RISKS:
            return TOOL_RISKS[tool]
        server, dot, _ = tool.partition(".")
        if dot and any(m.name == server and m.transport == "http" for m in self.mcp_servers):
            return ("external",)
        return ()

    @model_validator(mode="after")
    def _command_needs_bash(self) -> Self:
        if self.provider.kind == "command" and "bash" not in self.tools:
            raise ValueError("the command provider runs each message with bash: add bash to tools")
        return self

    def max_duration_for(self, input: TurnInput) -> int | None:
        """The turn's ``max_duration`` in ms: the input's TurnConfig, else these defaults."""
        if input.config is not None and input.config.max_duration is not None:
            return input.config.max_duration
        return self.defaults.max_duration

    @classmethod
    def from_yaml(cls, source: str | Path) -> Self:
        """Load a spec from a YAML file (a ``Path``, or a string naming an existing file) or YAML text.

        Raises:
            SpecError: unreadable file, invalid YAML, or a spec that does not validate (the
                message names each bad field).
        """
        import yaml

        from airlock.errors import SpecError

        text: str
        origin = "<text>"
        if isinstance(source, Path) or ("\n" not in source and _names_a_file(source)):
            origin = shorten(str(source), 200)
            try:
                text = Path(source).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise SpecError(f"cannot read agent spec {origin}: {e}") from e
        else:
            text = source
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SpecError(f"agent spec {origin} is not valid YAML: {e}") from e
        except RecursionError:  # the parser recurses once per level of nesting
            raise SpecError(f"agent spec {origin} is nested too deeply") from None
        except ValueError as e:  # a value YAML parses but Python cannot hold (2001-13-45, 5000 digits)
            raise SpecError(f"agent spec {origin} has an unreadable value: {shorten(str(e), 300)}") from e
        if _expands_beyond(data, _MAX_SPEC_VALUES):
            raise SpecError(
                f"agent spec {origin} expands to more than {_MAX_SPEC_VALUES} values (aliases in aliases?)"
            )
        if not isinstance(data, dict):
            raise SpecError(f"agent spec {origin} must be a mapping, not {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in e.errors()
            )
            raise SpecError(f"invalid agent spec {origin}: {problems}") from e
