"""airlock.policy: what a sandbox may do, as data every backend and proxy shares.

Backend-neutral and cheap to import (pydantic and the standard library):

* :mod:`.plan` — :func:`compile_plan` turns an ``EnvironmentSpec``'s network and
  credential parts into a :class:`SandboxPlan` (egress rules, sidecar routes, placements).
* :mod:`.cluster` — in-cluster destinations (a Kubernetes Service and its pods).
* :mod:`.decision` — the egress decision (:func:`decide`, :func:`precheck`) the proxies
  enforce.
* :mod:`.secrets` — secret resolvers and :func:`redact`.
* :mod:`.credentials` — resolving a plan's credentials and pointing an agent at its sidecar.
* :mod:`.effects` — the effect policy a sandbox's declared effects are checked against.
* :mod:`.resources` — Kubernetes-style quantities (``512Mi``, ``500m``).
* :mod:`.approval` — who approves an agent's gated tool calls, and how decisions combine.
* :mod:`.durability` — what becomes of a job whose sandbox or controller was lost.
* :mod:`.workspace` — the paths, globs and caps of files entering and leaving a workspace.
* :mod:`.input_files` — what the model is told of a job's input files.
"""

from .approval import ApprovalDecision, ApprovalPolicy
from .cluster import ClusterService
from .credentials import (
    PROVIDER_DEFAULT_URLS,
    ResolvedCredentials,
    env_var_values,
    resolve_credentials,
    sidecar_agent,
)
from .decision import Decision, decide, precheck
from .durability import LOST_CALL, DurabilityPolicy
from .effects import EffectContext, EffectPolicy, check_effect
from .input_files import InputFilesPolicy
from .plan import (
    SIDECAR_CONVENTIONS,
    CredentialPlacement,
    EgressPlan,
    EgressRule,
    PolicyError,
    SandboxPlan,
    SidecarRoute,
    compile_plan,
)
from .resources import parse_cpu, parse_memory
from .secrets import (
    REDACTED,
    ChainResolver,
    EnvSecretResolver,
    FileSecretResolver,
    SecretResolver,
    redact,
    resolve_secret,
)
from .workspace import INPUT_CAPS, FileCaps, FileRefused, FilesOverCap, matches, workspace_path

__all__ = [
    "INPUT_CAPS",
    "LOST_CALL",
    "PROVIDER_DEFAULT_URLS",
    "REDACTED",
    "SIDECAR_CONVENTIONS",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ChainResolver",
    "ClusterService",
    "CredentialPlacement",
    "Decision",
    "DurabilityPolicy",
    "EffectContext",
    "EffectPolicy",
    "EgressPlan",
    "EgressRule",
    "EnvSecretResolver",
    "FileCaps",
    "FileRefused",
    "FileSecretResolver",
    "FilesOverCap",
    "InputFilesPolicy",
    "PolicyError",
    "ResolvedCredentials",
    "SandboxPlan",
    "SecretResolver",
    "SidecarRoute",
    "check_effect",
    "compile_plan",
    "decide",
    "env_var_values",
    "matches",
    "parse_cpu",
    "parse_memory",
    "precheck",
    "redact",
    "resolve_credentials",
    "resolve_secret",
    "sidecar_agent",
    "workspace_path",
]
