"""Compile located YAML documents into an AirlockConfig, every problem tied to file:line:col."""

from __future__ import annotations

import contextlib
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from airlock.errors import shorten
from airlock.identity import AuthSettings, RetentionSettings
from airlock.policy.effects import EffectPolicy
from airlock.policy.plan import PolicyError, SidecarRoute, compile_plan
from airlock.sandbox import LOCAL_MODEL, Placement, PoolSettings, backend_names, backends
from airlock.sandbox import backend as sandbox_backend
from airlock.spec import TOOL_NAMES, AgentSpec
from layer0 import (
    ContainerIsolation,
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    GvisorIsolation,
    IsolationBoundary,
    MicroVmIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    ProcessIsolation,
    ResourceLimits,
    TurnConfig,
    WasmIsolation,
)

from ._errors import ConfigIssue, InvalidConfigError
from ._model import AgentConfig, AirlockConfig
from ._schema import (
    LITERAL_SECRET_KEYS,
    SANDBOX_KEYS,
    ApprovalConfig,
    ContainerIsolationConfig,
    DefaultsConfig,
    EnvVarInjection,
    FileConfig,
    FileInjection,
    GvisorIsolationConfig,
    IsolationConfig,
    MicroVmIsolationConfig,
    ProcessIsolationConfig,
    SandboxConfig,
    SecretSource,
    SidecarInjection,
    WasmIsolationConfig,
)
from ._values import looks_like_secret_value
from ._yaml import KeyPath, LocatedDocument, format_path

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_SECRET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_POLICY_SOURCE = re.compile(r"spec\.(network\.rules|credentials)\[(\d+)\]")
#: What each sandbox key asks of a backend: the capability that enforces it.
_ENFORCED_BY = {"network": "network_policy", "credentials": "credentials", "resources": "resource_limits"}
_VALUE_PREFIXES = ("Value error, ", "Assertion failed, ")
_LITERAL_SECRET_MESSAGE = (
    "literal secret values are not allowed in configuration; name the secret "
    "(credentials: [{secret: NAME, inject: ...}]) and declare where its value comes from under "
    "the top-level `secrets:` (NAME: {env: VAR} or NAME: {file: path})"
)


def compile_documents(docs: list[LocatedDocument]) -> AirlockConfig:
    """Validate and compile ``docs`` (one or several files) into an AirlockConfig.

    Raises:
        InvalidConfigError: listing every problem found, each at its file:line:col and key.
    """
    issues: list[ConfigIssue] = []
    files: list[tuple[LocatedDocument, FileConfig]] = []
    for doc in docs:
        if doc.data is None:
            files.append((doc, FileConfig()))
            continue
        if not isinstance(doc.data, dict):
            issues.append(
                doc.issue(
                    (),
                    "the top level must be a mapping with `agents:` (and optionally "
                    "`secrets:`, `defaults:`, `backends:`, `pool:`, `auth:`, `retention:`, `version:`)",
                )
            )
            continue
        try:
            files.append((doc, FileConfig.model_validate(doc.data)))
        except ValidationError as e:
            issues += _map_errors(doc, (), e, FileConfig)
            # Keep checking the sections that are valid (a bad `secrets:` hides no agent error).
            bad = {err["loc"][0] for err in e.errors() if err["loc"]}
            with contextlib.suppress(ValidationError):
                rest = {k: v for k, v in doc.data.items() if k not in bad}
                files.append((doc, FileConfig.model_validate(rest)))

    secrets: dict[str, SecretSource] = {}
    secret_where: dict[str, str] = {}
    defaults: dict[str, Any] = {}
    default_where: dict[str, str] = {}
    agent_where: dict[str, str] = {}
    entries: list[tuple[LocatedDocument, str, dict[str, Any]]] = []
    pool: tuple[PoolSettings, str] | None = None
    for doc, parsed in files:
        if parsed.pool is not None:
            where = _where(doc, ("pool",))
            if pool is not None:
                issues.append(doc.issue(("pool",), f"pool is set twice: {pool[1]} and {where}"))
            else:
                pool = (parsed.pool, where)
        for name, source in parsed.secrets.items():
            path: KeyPath = ("secrets", name)
            where = _where(doc, path)
            if not _SECRET_NAME.match(name) or looks_like_secret_value(name):
                issues.append(
                    doc.issue(
                        path,
                        "a secret name must be 1-128 letters, digits, '.', '_' or '-' "
                        "(a name, never the secret's value)",
                    )
                )
            elif name in secrets:
                issues.append(
                    doc.issue(path, f"secret {name!r} is declared twice: {secret_where[name]} and {where}")
                )
            else:
                secrets[name], secret_where[name] = _anchor_secret(doc.file, source), where
        if parsed.defaults is not None:
            for field in parsed.defaults.model_fields_set:
                path = ("defaults", field)
                if field in defaults:
                    issues.append(
                        doc.issue(
                            path,
                            f"defaults.{field} is set twice: {default_where[field]} and {_where(doc, path)}",
                        )
                    )
                else:
                    defaults[field] = getattr(parsed.defaults, field)
                    default_where[field] = _where(doc, path)
        for name, raw in parsed.agents.items():
            path = ("agents", name)
            if not _NAME.match(name):
                issues.append(
                    doc.issue(
                        path,
                        "an agent name must be 1-63 letters, digits, '.', '_' or '-', "
                        "starting with a letter or digit",
                    )
                )
            elif name in agent_where:
                issues.append(
                    doc.issue(
                        path, f"agent {name!r} is defined twice: {agent_where[name]} and {_where(doc, path)}"
                    )
                )
            else:
                agent_where[name] = _where(doc, path)
                entries.append((doc, name, raw))

    settings = _backend_settings(files, issues)
    auth = _auth_section(files, issues)
    retention = _retention_section(files, issues)
    agents: dict[str, AgentConfig] = {}
    for doc, name, raw in entries:
        agent = _compile_agent(doc, name, raw, DefaultsConfig(**defaults), secrets, issues)
        if agent is not None:
            agents[name] = agent
            issues += _check_effect_targets(doc, agent, agent_where)
    if not issues and not agents:
        issues += _no_agents(docs, files)
    if issues:
        raise InvalidConfigError(issues)
    return AirlockConfig(
        files=tuple(d.file for d in docs),
        agents=agents,
        secrets=secrets,
        backend_settings=_placed_settings(settings, agents),
        pool=pool[0] if pool is not None else PoolSettings(),
        auth=auth,
        retention=retention,
    )


def _retention_section(
    files: list[tuple[LocatedDocument, FileConfig]], issues: list[ConfigIssue]
) -> RetentionSettings:
    """The one ``retention:`` section of the files; the defaults when none has one."""
    found: tuple[RetentionSettings, str] | None = None
    for doc, parsed in files:
        if parsed.retention is None:
            continue
        where = _where(doc, ("retention",))
        if found is not None:
            issues.append(doc.issue(("retention",), f"retention is set twice: {found[1]} and {where}"))
        else:
            found = (parsed.retention, where)
    return found[0] if found is not None else RetentionSettings()


def _auth_section(files: list[tuple[LocatedDocument, FileConfig]], issues: list[ConfigIssue]) -> AuthSettings:
    """The one ``auth:`` section of the files (its ``jwks_file`` and ``keys_file`` made
    absolute, relative to the file that names them); the defaults when none has one."""
    found: tuple[AuthSettings, str] | None = None
    for doc, parsed in files:
        if parsed.auth is None:
            continue
        where = _where(doc, ("auth",))
        if found is not None:
            issues.append(doc.issue(("auth",), f"auth is set twice: {found[1]} and {where}"))
            continue
        auth = parsed.auth
        if auth.keys_file is not None:
            auth = auth.model_copy(update={"keys_file": _anchored(doc.file, auth.keys_file)})
        if auth.oidc is not None and auth.oidc.jwks_file is not None:
            oidc = auth.oidc.model_copy(update={"jwks_file": _anchored(doc.file, auth.oidc.jwks_file)})
            auth = auth.model_copy(update={"oidc": oidc})
        found = (auth, where)
    return found[0] if found is not None else AuthSettings()


def _anchored(file: Path, path: Path) -> Path:
    """``path`` made absolute, relative to the configuration file that names it."""
    path = path.expanduser()
    return path if path.is_absolute() else (file.parent / path).resolve()


def _no_agents(
    docs: list[LocatedDocument], files: list[tuple[LocatedDocument, FileConfig]]
) -> list[ConfigIssue]:
    """Nothing when a file writes ``agents: {}`` (a controller with no agent yet, refusing
    every job); else the issue that no file defines an agent."""
    if any("agents" in parsed.model_fields_set for _, parsed in files):
        return []
    origin = docs[0].file if len(docs) == 1 else docs[0].file.parent
    return [ConfigIssue(origin, 0, 0, "agents", "no agents defined")]


def _backend_settings(
    files: list[tuple[LocatedDocument, FileConfig]], issues: list[ConfigIssue]
) -> dict[str, BaseModel]:
    """Each ``backends.<name>`` section, validated against that backend's settings model."""
    out: dict[str, BaseModel] = {}
    where: dict[str, str] = {}
    for doc, parsed in files:
        for name, raw in parsed.backends.items():
            path: KeyPath = ("backends", name)
            if name not in backend_names():
                issues.append(
                    doc.issue(path, f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}")
                )
                continue
            model = sandbox_backend(name).settings
            if model is None:
                issues.append(doc.issue(path, f"backend {name!r} takes no settings"))
            elif name in out:
                issues.append(
                    doc.issue(path, f"backends.{name} is set twice: {where[name]} and {_where(doc, path)}")
                )
            else:
                try:
                    out[name] = model.model_validate(raw or {})
                    where[name] = _where(doc, path)
                except ValidationError as e:
                    issues += _map_errors(doc, path, e, model)
    return out


def _placed_settings(settings: dict[str, BaseModel], agents: dict[str, AgentConfig]) -> dict[str, BaseModel]:
    """Each backend's settings given its agents' placements (Kubernetes: the RuntimeClasses
    they name become readable by name: its access table, the chart's Role)."""
    out = dict(settings)
    for b in backends():
        placements = [a.placement for a in agents.values() if a.backend == b.name and not a.placement.empty]
        if b.placed_settings is not None and placements:
            out[b.name] = b.placed_settings(out.get(b.name), placements)
    return out


def _where(doc: LocatedDocument, path: KeyPath) -> str:
    _, pos = doc.locate(path)
    return f"{doc.file}:{pos.line}:{pos.column}"


def _anchor_secret(file: Path, source: SecretSource) -> SecretSource:
    """A file source made absolute, relative to the configuration file that names it."""
    if source.file is None:
        return source
    path = Path(source.file).expanduser()
    if not path.is_absolute():
        path = (file.parent / path).resolve()
    return source.model_copy(update={"file": str(path)})


def _compile_agent(
    doc: LocatedDocument,
    name: str,
    raw: dict[str, Any],
    top_defaults: DefaultsConfig,
    secrets: dict[str, SecretSource],
    issues: list[ConfigIssue],
) -> AgentConfig | None:
    prefix: KeyPath = ("agents", name)
    before = len(issues)
    if "name" in raw:
        issues.append(
            doc.issue((*prefix, "name"), "the agent's name is its key under `agents:`; remove `name:`")
        )
    sandbox_raw = {k: v for k, v in raw.items() if k in SANDBOX_KEYS}
    spec_raw = {k: v for k, v in raw.items() if k not in SANDBOX_KEYS and k != "name"}
    sandbox: SandboxConfig | None = None
    try:
        sandbox = SandboxConfig.model_validate(sandbox_raw)
    except ValidationError as e:
        issues += _map_errors(doc, prefix, e, SandboxConfig)

    merged = {**top_defaults.model_dump(exclude_none=True)}
    if sandbox is not None:
        merged.update(sandbox.defaults.model_dump(exclude_none=True))
    defaults = TurnConfig(**merged)

    spec_raw = _anchor_script(doc, prefix, spec_raw, issues)
    spec: AgentSpec | None = None
    approval = sandbox.approval.policy() if sandbox is not None and sandbox.approval is not None else None
    gate = approval.gate() if approval is not None else None
    try:
        spec = AgentSpec.model_validate({**spec_raw, "name": name, "defaults": defaults, "approval": gate})
    except ValidationError as e:
        issues += _map_errors(doc, prefix, e, AgentSpec, raw=spec_raw)

    if sandbox is None or spec is None or len(issues) > before:
        return None
    from airlock import wire  # here: importing the config must not import grpc (fast CLI)

    try:  # what validates but the runner's wire cannot carry (NaN, integers beyond 64 bits)
        wire.spec_to_proto(spec)
    except (wire.MalformedMessage, ValueError, OverflowError) as e:
        issues.append(doc.issue(prefix, f"cannot be sent to the sandbox's runner: {e}"))
        return None
    environment, routes = _environment(doc, prefix, sandbox, secrets, issues)
    _check_local_model(doc, prefix, spec, sandbox, issues)
    _check_placement(doc, prefix, sandbox, issues)
    if environment is None or len(issues) > before:
        return None
    try:
        compile_plan(environment, sidecar_routes=routes)
    except PolicyError as e:
        issues += [_policy_issue(doc, prefix, sandbox, p) for p in e.problems]
        return None
    issues += _check_effect_tools(doc, prefix, spec, sandbox.effects)
    issues += _check_approval(doc, prefix, spec, sandbox.approval)
    if len(issues) > before:
        return None
    used = {c.name for c in environment.credentials}
    return AgentConfig(
        name=name,
        spec=spec,
        environment=environment,
        backend=sandbox.backend,  # validated against the sandbox backend registry
        sidecar_routes=routes,
        effects=sandbox.effects,
        approval=approval,
        durability=sandbox.durability,
        input_files=sandbox.input_files,
        placement=sandbox.placement or Placement(),
        tree_budget=sandbox.tree_budget,
        secrets={k: v for k, v in secrets.items() if k in used},
        source=doc.file,
        line=doc.locate(prefix)[1].line,
    )


def _check_approval(
    doc: LocatedDocument, prefix: KeyPath, spec: AgentSpec, approval: ApprovalConfig | None
) -> list[ConfigIssue]:
    """Every ``approval.tools`` entry must match one of the agent's tools (a typo would let
    the call it meant run unapproved)."""
    if approval is None:
        return []
    from fnmatch import fnmatchcase

    issues = []
    for i, pattern in enumerate(approval.tools):
        if not any(fnmatchcase(tool, pattern) for tool in spec.tools):
            issues.append(
                doc.issue(
                    (*prefix, "approval", "tools", i),
                    f"{pattern!r} matches none of the agent's tools ({', '.join(spec.tools) or 'none'}); "
                    "a misspelt name would let the call it meant run without approval",
                )
            )
    return issues


#: Effect tools, the ``effects:`` grant without which every call of them is refused, and
#: what that grant lists.
_TOOL_GRANTS = {
    "delegate": ("delegate", "agent"),
    "handoff": ("handoff", "agent"),
    "signal": ("signal", "workflow"),
    "write_memory": ("memory", "scope"),
    "delete_memory": ("memory", "scope"),
}


def _check_effect_tools(
    doc: LocatedDocument, prefix: KeyPath, spec: AgentSpec, policy: EffectPolicy
) -> list[ConfigIssue]:
    """An effect tool offered with nothing granted to it would only ever be refused: an error."""
    issues: list[ConfigIssue] = []
    for i, tool in enumerate(spec.tools):
        if tool not in _TOOL_GRANTS:
            continue
        grant, what = _TOOL_GRANTS[tool]
        if not getattr(policy, grant):
            issues.append(
                doc.issue(
                    (*prefix, "tools", i),
                    f"tool {tool!r} is offered but effects.{grant} grants no {what}, so every call "
                    f"would be refused; list what it may use under effects.{grant}, or remove the tool",
                )
            )
    return issues


def _check_effect_targets(
    doc: LocatedDocument, agent: AgentConfig, defined: dict[str, str]
) -> list[ConfigIssue]:
    """Every agent named in ``effects.delegate`` / ``effects.handoff`` must be defined."""
    issues: list[ConfigIssue] = []
    known = ", ".join(sorted(defined))
    for key in ("delegate", "handoff"):
        for i, target in enumerate(getattr(agent.effects, key)):
            if target not in defined:
                issues.append(
                    doc.issue(
                        ("agents", agent.name, "effects", key, i),
                        f"unknown agent {target!r}; defined agents: {known}",
                    )
                )
    return issues


def _anchor_script(
    doc: LocatedDocument, prefix: KeyPath, spec_raw: dict[str, Any], issues: list[ConfigIssue]
) -> dict[str, Any]:
    """A scripted provider's ``script: path`` made absolute (relative to the file) and checked."""
    provider = spec_raw.get("provider")
    if not isinstance(provider, dict) or not isinstance(provider.get("script"), str):
        return spec_raw
    key = (*prefix, "provider", "script")
    try:  # a name too long for the file system, or with a NUL byte, is no file either
        path = Path(provider["script"]).expanduser()
        if not path.is_absolute():
            path = (doc.file.parent / path).resolve()
        found = path.is_file()
    except (OSError, ValueError, RuntimeError) as e:
        issues.append(doc.issue(key, shorten(f"script file {provider['script']!r} cannot be used: {e}", 400)))
        return spec_raw
    if not found:
        issues.append(doc.issue(key, shorten(f"script file {str(path)!r} not found", 400)))
        return spec_raw
    return {**spec_raw, "provider": {**provider, "script": str(path)}}


def _isolation(config: IsolationConfig) -> IsolationBoundary:
    if isinstance(config, ContainerIsolationConfig):
        return ContainerIsolation(image=config.image)
    if isinstance(config, WasmIsolationConfig):
        return WasmIsolation(runtime=config.runtime)
    if isinstance(config, GvisorIsolationConfig):
        return GvisorIsolation()
    if isinstance(config, MicroVmIsolationConfig):
        return MicroVmIsolation()
    assert isinstance(config, ProcessIsolationConfig)
    return ProcessIsolation()


def _environment(
    doc: LocatedDocument,
    prefix: KeyPath,
    sandbox: SandboxConfig,
    secrets: dict[str, SecretSource],
    issues: list[ConfigIssue],
) -> tuple[EnvironmentSpec | None, dict[str, SidecarRoute]]:
    backend = sandbox_backend(sandbox.backend)
    ok = True
    for key, capability in _ENFORCED_BY.items():
        if getattr(backend.capabilities, capability) or key not in sandbox.model_fields_set:
            continue
        if getattr(sandbox, key):
            issues.append(
                doc.issue(
                    (*prefix, key),
                    f"backend {backend.name!r} cannot enforce `{key}` ({backend.summary}); "
                    "use backend docker",
                )
            )
            ok = False
    if sandbox.isolation is not None:
        supported = backend.isolations
        for i, boundary in enumerate(sandbox.isolation):
            if boundary.type not in supported:
                can = ", ".join(sorted(supported)) or "none"
                issues.append(
                    doc.issue(
                        (*prefix, "isolation", i),
                        f"backend {backend.name!r} cannot provide {boundary.type!r} isolation "
                        f"(it provides: {can}); isolation is never downgraded",
                    )
                )
                ok = False
        if not any(b.type in supported for b in sandbox.isolation):
            boundaries = ", ".join(sorted(supported))
            issues.append(
                doc.issue(
                    (*prefix, "isolation"),
                    f"backend {backend.name!r} needs an isolation boundary ({boundaries})",
                )
            )
            ok = False
    isolation = (
        [_isolation(b) for b in sandbox.isolation]
        if sandbox.isolation is not None
        else list(backend.default_isolation)
    )

    credentials: list[CredentialRef] = []
    routes: dict[str, SidecarRoute] = {}
    seen: dict[str, int] = {}
    for i, cred in enumerate(sandbox.credentials):
        path: KeyPath = (*prefix, "credentials", i, "secret")
        if looks_like_secret_value(cred.secret):
            issues.append(
                doc.issue(
                    path,
                    "this looks like a secret value; name the secret instead and "
                    "declare its source under the top-level `secrets:`",
                )
            )
            ok = False
            continue
        if cred.secret not in secrets:
            declared = ", ".join(sorted(secrets)) or "none"
            issues.append(
                doc.issue(
                    path,
                    f"secret {cred.secret!r} is not declared under the top-level "
                    f"`secrets:` (declared: {declared})",
                )
            )
            ok = False
            continue
        if cred.secret in seen:
            issues.append(
                doc.issue(
                    path, f"secret {cred.secret!r} is already injected by credentials[{seen[cred.secret]}]"
                )
            )
            ok = False
            continue
        seen[cred.secret] = i
        inject = cred.inject
        if isinstance(inject, EnvVarInjection):
            injection = CredentialInjection.env_var(inject.env_var)
        elif isinstance(inject, FileInjection):
            injection = CredentialInjection.file(inject.file)
        else:
            injection = CredentialInjection.sidecar()
            if isinstance(inject, SidecarInjection):
                routes[cred.secret] = inject.sidecar
        credentials.append(CredentialRef(name=cred.secret, injection=injection))

    ok = _check_cluster_services(doc, prefix, sandbox, issues) and ok
    network: NetworkPolicy | None = None
    if backend.capabilities.network_policy:
        net = sandbox.network
        rules = (
            []
            if net is None
            else (
                [
                    NetworkRule(destination=r.target, port=r.port, action=NetworkAction.ALLOW)
                    for r in net.allow
                ]
                + [
                    NetworkRule(destination=r.destination, port=r.port, action=NetworkAction.DENY)
                    for r in net.deny
                ]
            )
        )
        network = NetworkPolicy(default=NetworkAction.DENY, rules=rules)
    resources = None
    if sandbox.resources is not None and sandbox.resources.model_fields_set:
        resources = ResourceLimits(**sandbox.resources.model_dump())
    if not ok:
        return None, routes
    spec = EnvironmentSpec(isolation=isolation, credentials=credentials, resources=resources, network=network)
    return spec, routes


def _check_cluster_services(
    doc: LocatedDocument, prefix: KeyPath, sandbox: SandboxConfig, issues: list[ConfigIssue]
) -> bool:
    """A Service destination needs a backend that renders it (Kubernetes); refuse it elsewhere."""
    backend = sandbox_backend(sandbox.backend)
    if backend.capabilities.cluster_services or sandbox.network is None:
        return True
    ok = True
    for i, rule in enumerate(sandbox.network.allow):
        if rule.service is not None:
            issues.append(
                doc.issue(
                    (*prefix, "network", "allow", i),
                    f"a Service destination ({{service: {rule.service}, namespace: {rule.namespace}}}) "
                    f"names a Kubernetes Service; backend {backend.name!r} has no cluster to reach it in: "
                    "use backend kubernetes, or allow the host by its domain or IP",
                )
            )
            ok = False
    return ok


def _check_placement(
    doc: LocatedDocument, prefix: KeyPath, sandbox: SandboxConfig, issues: list[ConfigIssue]
) -> None:
    """``placement`` needs a backend that places sandboxes; its ``runtime_class`` only goes
    with ``container`` isolation (a gVisor or Kata sandbox keeps its own RuntimeClass)."""
    placement = sandbox.placement
    if placement is None or placement.empty:
        return
    backend = sandbox_backend(sandbox.backend)
    if not backend.capabilities.placement:
        able = ", ".join(b.name for b in backends() if b.capabilities.placement) or "none"
        issues.append(
            doc.issue(
                (*prefix, "placement"),
                f"backend {backend.name!r} cannot place its sandboxes (node_selector, tolerations, "
                f"runtime_class); placement is honoured by backend {able}",
            )
        )
        return
    stronger = [b.type for b in sandbox.isolation or () if b.type in ("gvisor", "micro_vm")]
    if placement.runtime_class is not None and stronger:
        issues.append(
            doc.issue(
                (*prefix, "placement", "runtime_class"),
                f"runtime_class goes only with `container` isolation: a {stronger[0]} sandbox runs under "
                f"the RuntimeClass backends.kubernetes.runtime_classes.{stronger[0]} names, which a "
                "placement never replaces (isolation is never downgraded); remove runtime_class, or "
                "use isolation [container]",
            )
        )


def _check_local_model(
    doc: LocatedDocument, prefix: KeyPath, spec: AgentSpec, sandbox: SandboxConfig, issues: list[ConfigIssue]
) -> None:
    if spec.provider.base_url != LOCAL_MODEL:
        return
    path: KeyPath = (*prefix, "provider", "base_url")
    if spec.provider.kind != "openai_compat":
        issues.append(
            doc.issue(
                path,
                f"base_url {LOCAL_MODEL!r} (the airlock-managed local model) needs "
                "provider kind openai_compat",
            )
        )
    allowed = sandbox.network.allow if sandbox.network else []
    enforced = sandbox_backend(sandbox.backend).capabilities.network_policy
    if enforced and not any(r.target == LOCAL_MODEL for r in allowed):
        issues.append(
            doc.issue(
                path,
                f"the sandbox cannot reach the local model: add "
                f"{{destination: {LOCAL_MODEL}}} to network.allow",
            )
        )


def _policy_issue(doc: LocatedDocument, prefix: KeyPath, sandbox: SandboxConfig, problem: str) -> ConfigIssue:
    """A policy compiler problem, re-anchored from ``spec.…`` paths to the YAML keys."""
    net = sandbox.network
    n_allow = len(net.allow) if net else 0

    def yaml_path(match: re.Match[str]) -> KeyPath:
        index = int(match.group(2))
        if match.group(1) == "credentials":
            return (*prefix, "credentials", index)
        return (
            (*prefix, "network", "allow", index)
            if index < n_allow
            else (*prefix, "network", "deny", index - n_allow)
        )

    first = _POLICY_SOURCE.search(problem)
    text = _POLICY_SOURCE.sub(lambda m: format_path(yaml_path(m)), problem)
    if first is None:
        return doc.issue((*prefix, "network"), text)
    path = yaml_path(first)
    shown = format_path(path)
    if text.startswith(shown):
        text = re.sub(r"^ \('([^']*)'\):", r"secret '\1':", text[len(shown) :])
        text = text.removeprefix(":").strip()
    return doc.issue(path, text)


# --- pydantic errors -> issues -------------------------------------------------------------


def _map_errors(
    doc: LocatedDocument,
    prefix: KeyPath,
    error: ValidationError,
    model: type[BaseModel],
    raw: dict[str, Any] | None = None,
) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for err in error.errors(include_url=False, include_input=False, include_context=True):
        loc: KeyPath = tuple(err["loc"])
        kind = err["type"]
        message = err["msg"]
        for p in _VALUE_PREFIXES:
            message = message.removeprefix(p)
        missing: str | None = None
        loc, message = _auth_problem(loc, kind, message)
        if kind == "missing" and loc and isinstance(loc[-1], str):
            missing = loc[-1]
            loc = loc[:-1]
        elif kind == "extra_forbidden" and loc and isinstance(loc[-1], str):
            key = loc[-1]
            if key.lower() in LITERAL_SECRET_KEYS:
                message = _LITERAL_SECRET_MESSAGE
            else:
                valid = _valid_keys(model, loc[:-1])
                if model is AgentSpec and not loc[:-1]:
                    valid = sorted((set(valid) - {"name"}) | SANDBOX_KEYS)
                message = f"unknown key {key!r}" + (f"; valid keys: {', '.join(valid)}" if valid else "")
        elif model is AgentSpec and loc == ("tools",) and raw is not None:
            loc = _first_unknown_tool(raw.get("tools"), loc)
        issues.append(doc.issue((*prefix, *loc), message, missing=missing))
    return issues


#: A problem that ``auth:``'s own checks word as ``roles.x.grants: ...`` (a path in the section).
_PATH_FIRST = re.compile(r"^([A-Za-z0-9_.-]+): ")


def _auth_problem(loc: KeyPath, kind: str, message: str) -> tuple[KeyPath, str]:
    """A problem found by a check of the whole ``auth:`` section, at the path its message
    starts with (the YAML walk stops at the deepest node that exists), and the rest of it."""
    found = _PATH_FIRST.match(message)
    if loc != ("auth",) or kind != "value_error" or found is None:
        return loc, message
    return (*loc, *found.group(1).split(".")), message[found.end() :]


def _first_unknown_tool(tools: Any, loc: KeyPath) -> KeyPath:
    if not isinstance(tools, list):
        return loc
    valid = set(TOOL_NAMES)
    for i, tool in enumerate(tools):
        if tool not in valid or tools.index(tool) != i:
            return (*loc, i)
    return loc


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def _valid_keys(model: type[BaseModel], path: KeyPath) -> list[str]:
    """Field names of the model at ``path`` under ``model`` (empty if ambiguous)."""
    candidates: list[type[BaseModel]] = [model]
    for element in path:
        if isinstance(element, str):
            owners = [c for c in candidates if element in c.model_fields]
            if owners:
                candidates = [m for o in owners for m in _models_in(o.model_fields[element].annotation)]
            else:  # a union tag or a dict key: keep members tagged with it, else all
                tagged = [c for c in candidates if _tag_of(c) == element]
                candidates = tagged or candidates
    unique = list(dict.fromkeys(candidates))
    return sorted(unique[0].model_fields) if len(unique) == 1 else []


def _tag_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("type")
    if field is None:
        return None
    args = typing.get_args(field.annotation)
    return args[0] if len(args) == 1 and isinstance(args[0], str) else None
