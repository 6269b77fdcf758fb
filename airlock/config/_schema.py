"""The file schema: what may be written in ``airlock.yaml`` (every model forbids unknown keys)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StringConstraints,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from airlock.behaviour.approval import ApprovalPolicy, OnTimeout, Strategy
from airlock.behaviour.durability import DurabilityPolicy
from airlock.behaviour.input_files import InputFilesPolicy
from airlock.identity import AuthSettings, RetentionSettings
from airlock.policy.cluster import ClusterService
from airlock.policy.effects import EffectPolicy
from airlock.policy.plan import SidecarRoute
from airlock.sandbox import LOCAL_MODEL, Placement, PoolSettings, backend_names
from layer0 import U32_MAX, Money

from ._tree_budget import TreeBudget
from ._values import check_env_name, normalise_destination, parse_duration, parse_quantity

#: A sandbox backend's name (one of :func:`airlock.sandbox.backend_names`).
Backend = str

#: Keys that would hold a literal secret value; they are rejected with a pointer to ``secrets:``.
LITERAL_SECRET_KEYS = frozenset(
    {"value", "secret_value", "literal", "plaintext", "password", "token", "api_key", "apikey", "key"}
)


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Duration = Annotated[int, BeforeValidator(parse_duration)]
Quantity = Annotated[str, BeforeValidator(parse_quantity)]
Port = Annotated[int, Strict(), Field(ge=1, le=65535)]


class DefaultsConfig(_Config):
    """Turn limits: ``max_turns``, ``max_cost`` (decimal string), ``max_duration`` ("90s" or ms)."""

    max_turns: Annotated[int, Strict(), Field(ge=1, le=U32_MAX)] | None = None
    max_cost: Annotated[Money, Field(gt=Decimal(0))] | None = None
    max_duration: Duration | None = None


class SecretSource(_Config):
    """Where a secret's value is read from on the controller: an env var or a file (never the value)."""

    env: Annotated[str, AfterValidator(check_env_name)] | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretSource:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of `env: VAR_NAME` or `file: path`")
        return self

    def describe(self) -> str:
        """``env $VAR`` or ``file PATH``."""
        return f"env ${self.env}" if self.env is not None else f"file {self.file}"


class EnvVarInjection(_Config):
    """``{env_var: NAME}``: set in the sandbox's environment."""

    env_var: Annotated[str, AfterValidator(check_env_name)]


class FileInjection(_Config):
    """``{file: /abs/path}``: a 0400 file on the sandbox's tmpfs."""

    file: str

    @field_validator("file")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("the file path inside the sandbox must be absolute")
        return value


class SidecarInjection(_Config):
    """``{sidecar: {upstream, header, value_prefix}}``: injected by the credential proxy."""

    sidecar: SidecarRoute


def _injection_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "sidecar_conventional"
    if isinstance(value, dict):
        for tag in ("env_var", "file", "sidecar"):
            if tag in value:
                return tag
    if isinstance(value, BaseModel):
        tags: dict[type[BaseModel], str] = {
            EnvVarInjection: "env_var",
            FileInjection: "file",
            SidecarInjection: "sidecar",
        }
        return tags.get(type(value))
    return None


Injection = Annotated[
    Annotated[Literal["sidecar"], Tag("sidecar_conventional")]
    | Annotated[EnvVarInjection, Tag("env_var")]
    | Annotated[FileInjection, Tag("file")]
    | Annotated[SidecarInjection, Tag("sidecar")],
    Discriminator(
        _injection_tag,
        custom_error_type="invalid_injection",
        custom_error_message="inject must be `sidecar`, {env_var: NAME}, {file: /path} or "
        "{sidecar: {upstream: URL, header: NAME}}",
    ),
]


class CredentialConfig(_Config):
    """A secret by name and how it reaches the agent."""

    secret: str
    inject: Injection


class NetworkRuleConfig(_Config):
    """A destination (domain, ``*.suffix``, IP or CIDR, or ``local-model``) and an optional port."""

    destination: str
    port: Port | None = None

    @field_validator("destination")
    @classmethod
    def _valid(cls, value: str) -> str:
        return LOCAL_MODEL if value == LOCAL_MODEL else normalise_destination(value)


class AllowRuleConfig(_Config):
    """An allow rule: a ``destination`` (as a deny rule's), or an in-cluster Service by name
    (Kubernetes only): ``{service, namespace, port}``.

    ``pods`` are the labels of the Service's pods (the NetworkPolicy's podSelector; unset:
    every pod of the namespace), ``target_port`` the pods' port when it differs from ``port``.
    """

    destination: str | None = None
    port: Port | None = None
    service: str | None = None
    namespace: str | None = None
    pods: dict[str, str] | None = None
    target_port: Port | None = None

    @field_validator("destination")
    @classmethod
    def _valid_destination(cls, value: str | None) -> str | None:
        if value is None or value == LOCAL_MODEL:
            return value
        return normalise_destination(value)

    @model_validator(mode="after")
    def _one_kind(self) -> AllowRuleConfig:
        if self.service is None:
            extra = [k for k in ("namespace", "pods", "target_port") if getattr(self, k) is not None]
            if self.destination is None and self.pods is not None:
                raise ValueError(
                    "pods alone are not a destination (they have no lasting name for the proxy to "
                    "grant): name their Service, {service, namespace, port, pods}; pods without "
                    "one can get a headless Service (clusterIP: None)"
                )
            if self.destination is None:
                raise ValueError(
                    "an allow rule needs a destination (or a service, with its namespace and port)"
                )
            if extra:
                raise ValueError(
                    f"{', '.join(extra)} belong to a service rule; this rule names a destination"
                )
            return self
        if self.destination is not None:
            raise ValueError("a rule names either a destination or a service, not both")
        if self.namespace is None or self.port is None:
            raise ValueError("a service rule needs its namespace and port: {service, namespace, port}")
        try:
            self.cluster_destination()
        except ValidationError as e:
            raise ValueError(
                "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in e.errors())
            ) from None
        return self

    def cluster_destination(self) -> str | None:
        """A service rule's destination text in an ``EnvironmentSpec`` (None: a destination rule).

        Raises:
            ValidationError: the name, namespace or a pod label is invalid.
        """
        if self.service is None:
            return None
        service = ClusterService(
            name=self.service,
            namespace=self.namespace or "",
            pods=self.pods or {},
            target_port=self.target_port,
        )
        return service.destination()

    @property
    def target(self) -> str:
        """The destination the rule allows, as an ``EnvironmentSpec`` carries it."""
        return self.cluster_destination() or self.destination or ""


class NetworkConfig(_Config):
    """Egress: deny all except ``allow`` rules; ``deny`` rules win over allow rules."""

    allow: list[AllowRuleConfig] = Field(default_factory=list)
    deny: list[NetworkRuleConfig] = Field(default_factory=list)


class ResourcesConfig(_Config):
    """Resource limits as Kubernetes-style quantities."""

    cpu: Quantity | None = None
    memory: Quantity | None = None
    disk: Quantity | None = None
    gpu: Quantity | None = None


class ProcessIsolationConfig(_Config):
    type: Literal["process"]


class ContainerIsolationConfig(_Config):
    type: Literal["container"]
    image: str | None = None


class GvisorIsolationConfig(_Config):
    type: Literal["gvisor"]


class MicroVmIsolationConfig(_Config):
    type: Literal["micro_vm"]


class WasmIsolationConfig(_Config):
    type: Literal["wasm"]
    runtime: str | None = None


def _isolation_shorthand(value: Any) -> Any:
    return {"type": value} if isinstance(value, str) else value


IsolationConfig = Annotated[
    ProcessIsolationConfig
    | ContainerIsolationConfig
    | GvisorIsolationConfig
    | MicroVmIsolationConfig
    | WasmIsolationConfig,
    Field(discriminator="type"),
    BeforeValidator(_isolation_shorthand),
]


class ApprovalConfig(_Config):
    """Which tool calls wait for a person, who decides, and what a timeout decides."""

    tools: list[Annotated[str, StringConstraints(min_length=1)]] = Field(default_factory=list)
    risks: list[Literal["destructive", "external"]] = Field(default_factory=list)
    approvers: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] = Field(
        default_factory=list
    )
    #: ``any``: the first approval approves, the first rejection rejects; ``all``: every approval
    #: approves, any rejection rejects; ``majority``: more than half (see airlock.behaviour.approval).
    strategy: Strategy = "any"
    timeout: Duration = 3_600_000
    on_timeout: OnTimeout = "reject"

    @model_validator(mode="after")
    def _gates_something(self) -> ApprovalConfig:
        if not self.tools and not self.risks:
            raise ValueError("name the calls that wait: `tools:` (names or globs) and/or `risks:`")
        if len(set(self.approvers)) != len(self.approvers):
            raise ValueError("an approver is listed twice")
        return self

    def policy(self) -> ApprovalPolicy:
        """The controller's approval policy."""
        return ApprovalPolicy(
            tools=tuple(self.tools),
            risks=tuple(self.risks),
            approvers=tuple(self.approvers),
            strategy=self.strategy,
            timeout_ms=self.timeout,
            on_timeout=self.on_timeout,
        )


class SandboxConfig(_Config):
    """The sandbox part of an agent entry (the rest of the entry is its AgentSpec)."""

    backend: str = "docker"
    isolation: list[IsolationConfig] | None = None
    network: NetworkConfig | None = None
    credentials: list[CredentialConfig] = Field(default_factory=list)
    resources: ResourcesConfig | None = None
    defaults: DefaultsConfig = Field(default_factory=DefaultsConfig)
    #: The effects the agent's turns may declare (checked by the controller before applying).
    effects: EffectPolicy = Field(default_factory=EffectPolicy)
    #: Tool calls that wait for a person's approval (unset: none).
    approval: ApprovalConfig | None = None
    #: What becomes of its jobs when their sandbox or controller is lost mid-turn.
    durability: DurabilityPolicy = Field(default_factory=DurabilityPolicy)
    #: What its jobs' messages say of their input files (unset: nothing).
    input_files: InputFilesPolicy = Field(default_factory=InputFilesPolicy)
    #: Where its sandboxes are scheduled (``node_selector``, ``tolerations``, ``runtime_class``),
    #: over the backend's own (only a backend that can place them accepts it: kubernetes).
    placement: Placement | None = None
    #: What a delegation tree rooted at this agent may spend in total (every descendant draws
    #: from it): ``max_cost``, ``max_tokens``, ``max_duration``, ``downgrade``, ``increase``.
    tree_budget: TreeBudget | None = None

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        names = backend_names()
        if value not in names:
            raise ValueError(f"unknown backend {value!r}; valid backends: {', '.join(names)}")
        return value


#: Agent-entry keys that describe the sandbox; every other key belongs to the AgentSpec.
SANDBOX_KEYS = frozenset(SandboxConfig.model_fields)


class FileConfig(_Config):
    """One configuration file: ``version``, ``secrets``, ``defaults``, ``agents``, ``auth``, …"""

    version: Literal[1] = 1
    secrets: dict[str, SecretSource] = Field(default_factory=dict)
    defaults: DefaultsConfig | None = None
    #: Each sandbox backend's settings by backend name, validated in a second step against
    #: the backend's own model (``backends: {kubernetes: {namespace: ...}}``).
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Warm sandboxes kept per sandbox shape (``pool: {size: 2}``; unset: none).
    pool: PoolSettings | None = None
    #: Who may call the controller: OIDC, roles, tenants and their quotas (unset: the
    #: bootstrap token only).
    auth: AuthSettings | None = None
    #: How long finished jobs and audit records are kept (unset: jobs 90 days, audit forever).
    retention: RetentionSettings | None = None
    #: Agent entries, validated in a second step (SandboxConfig + AgentSpec).
    agents: dict[str, dict[str, Any]] = Field(default_factory=dict)
