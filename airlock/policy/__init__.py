"""airlock.policy: what a sandbox may do, as data every backend and proxy shares.

How an agent behaves (approvals, durability, input files) is :mod:`airlock.behaviour`.

Backend-neutral and cheap to import (pydantic and the standard library):

* :mod:`.plan` — :func:`compile_plan` turns an ``EnvironmentSpec``'s network and
  credential parts into a :class:`SandboxPlan` (egress rules, sidecar routes, placements).
* :mod:`.cluster` — in-cluster destinations (a Kubernetes Service and its pods).
* :mod:`.decision` — the egress decision (:func:`decide`, :func:`precheck`) the proxies
  enforce.
* :mod:`.secrets` — secret resolvers and :func:`redact`.
* :mod:`.credentials` — resolving a plan's credentials.
* :mod:`.effects` — the effect policy a sandbox's declared effects are checked against.
* :mod:`.resources` — Kubernetes-style quantities (``512Mi``, ``500m``).
* :mod:`.workspace` — the paths, globs and caps of files entering and leaving a workspace.
* :mod:`.manifest` — a workspace's files as a manifest (digest, increments) and the snapshot
  events that carry it.
"""

from .cluster import ClusterService
from .credentials import (
    PROVIDER_DEFAULT_URLS,
    ResolvedCredentials,
    env_var_values,
    resolve_credentials,
)
from .decision import Decision, decide, precheck
from .effects import EffectContext, EffectPolicy, check_effect
from .manifest import (
    EMPTY_MANIFEST,
    ManifestEntry,
    ManifestRefused,
    SkippedFile,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
    sha256_hex,
    stored_blob,
)
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
    "EMPTY_MANIFEST",
    "INPUT_CAPS",
    "PROVIDER_DEFAULT_URLS",
    "REDACTED",
    "SIDECAR_CONVENTIONS",
    "ChainResolver",
    "ClusterService",
    "CredentialPlacement",
    "Decision",
    "EffectContext",
    "EffectPolicy",
    "EgressPlan",
    "EgressRule",
    "EnvSecretResolver",
    "FileCaps",
    "FileRefused",
    "FileSecretResolver",
    "FilesOverCap",
    "ManifestEntry",
    "ManifestRefused",
    "PolicyError",
    "ResolvedCredentials",
    "SandboxPlan",
    "SecretResolver",
    "SidecarRoute",
    "SkippedFile",
    "WorkspaceBlob",
    "WorkspaceManifest",
    "WorkspaceSnapshot",
    "WorkspaceStopped",
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
    "sha256_hex",
    "stored_blob",
    "workspace_path",
]
