"""Protocol ④, Environment: isolation, credentials and resources around a turn."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Protocol, Self, runtime_checkable

from pydantic import Field

from ._input import TurnInput
from ._turn import Turn, TurnOutput
from ._wire import U16, ExternallyTagged, Json, WireModel


class NetworkAction(StrEnum):
    """Allow or deny."""

    ALLOW = "allow"
    DENY = "deny"


class NetworkRule(WireModel):
    """A destination (domain, ``*.suffix`` or CIDR), an optional port, and an action."""

    destination: str
    port: U16 | None = None
    action: NetworkAction


class NetworkPolicy(WireModel):
    """Default action plus explicit rules."""

    default: NetworkAction
    rules: list[NetworkRule]


class ProcessIsolation(WireModel):
    """An OS process boundary (the weakest)."""

    type: Literal["process"] = "process"


class ContainerIsolation(WireModel):
    """A container (Docker, containerd, …), optionally from a given image."""

    type: Literal["container"] = "container"
    image: str | None = None


class GvisorIsolation(WireModel):
    """Syscall interception by gVisor (``runsc``)."""

    type: Literal["gvisor"] = "gvisor"


class MicroVmIsolation(WireModel):
    """A hardware-enforced micro VM (Kata Containers)."""

    type: Literal["micro_vm"] = "micro_vm"


class WasmIsolation(WireModel):
    """A WebAssembly sandbox."""

    type: Literal["wasm"] = "wasm"
    runtime: str | None = None


class NetworkPolicyIsolation(WireModel):
    """Network-level isolation rules."""

    type: Literal["network_policy"] = "network_policy"
    rules: list[NetworkRule]


class CustomIsolation(WireModel):
    """An isolation boundary layer0 does not name."""

    type: Literal["custom"] = "custom"
    boundary_type: str
    config: Json


#: One isolation boundary (``"type"``-tagged); several compose, outermost first.
IsolationBoundary = Annotated[
    ProcessIsolation
    | ContainerIsolation
    | GvisorIsolation
    | MicroVmIsolation
    | WasmIsolation
    | NetworkPolicyIsolation
    | CustomIsolation,
    Field(discriminator="type"),
]


class CredentialInjection(ExternallyTagged):
    """How a credential reaches the turn: ``{"env_var": {"var_name"}}``,
    ``{"file": {"path"}}`` or ``"sidecar"`` (the agent never sees the secret)."""

    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {
        "env_var": {"var_name": "var_name"},
        "file": {"path": "path"},
        "sidecar": None,
    }
    var_name: str | None = None
    path: str | None = None

    @classmethod
    def env_var(cls, var_name: str) -> Self:
        """Set as an environment variable."""
        return cls._make("env_var", {"var_name": var_name})

    @classmethod
    def file(cls, path: str) -> Self:
        """Mounted as a file."""
        return cls._make("file", {"path": path})

    @classmethod
    def sidecar(cls) -> Self:
        """Injected by a proxy outside the sandbox."""
        return cls._make("sidecar")


class CredentialRef(WireModel):
    """A credential by name (never its value) and how to inject it."""

    name: str
    injection: CredentialInjection


class ResourceLimits(WireModel):
    """Resource limits as Kubernetes-style quantities (``"500m"``, ``"2Gi"``)."""

    cpu: str | None = None
    memory: str | None = None
    disk: str | None = None
    gpu: str | None = None


class EnvironmentSpec(WireModel):
    """Declarative description of an execution environment."""

    isolation: list[IsolationBoundary] = Field(default_factory=list)
    credentials: list[CredentialRef] = Field(default_factory=list)
    resources: ResourceLimits | None = None
    network: NetworkPolicy | None = None


@runtime_checkable
class Environment(Protocol):
    """Protocol ④: run a turn inside an isolation boundary.

    Provision, inject credentials, apply limits, execute, capture, tear down.
    """

    async def run(self, turn: Turn, input: TurnInput, spec: EnvironmentSpec) -> TurnOutput:
        """Execute ``turn`` within this environment. Raises ``EnvError``."""
        ...
