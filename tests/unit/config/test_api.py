"""Public API of airlock.config, backend/isolation defaults, and the secret resolver."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import airlock.config
from airlock.config import ConfigSecretResolver, InvalidConfigError, SecretSource, load_config
from airlock.policy.secrets import ChainResolver, SecretResolver, resolve_secret
from layer0 import ContainerIsolation, EnvError, GvisorIsolation, ProcessIsolation

Write = Callable[..., Path]


def test_exports_are_exactly_the_public_names() -> None:
    public = {n for n in dir(airlock.config) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(airlock.config, n)).__name__ == "module"}
    assert set(airlock.config.__all__) == public - modules
    for name in airlock.config.__all__:
        assert getattr(airlock.config, name) is not None


def test_backends_get_their_own_isolation_defaults(write: Write) -> None:
    path = write(
        """
        agents:
          d: {provider: {kind: scripted, script: []}}
          g:
            provider: {kind: scripted, script: []}
            isolation: [{type: container, image: airlock-runner:dev}, gvisor]
          p: {provider: {kind: scripted, script: []}, backend: process}
        """
    )
    config = load_config(path)
    assert config.agent("d").environment.isolation == [ContainerIsolation()]
    assert config.agent("g").environment.isolation == [
        ContainerIsolation(image="airlock-runner:dev"),
        GvisorIsolation(),
    ]
    assert config.agent("p").environment.isolation == [ProcessIsolation()]
    process = config.agent("p").environment  # the process backend enforces no network policy
    assert (process.network, process.credentials, process.resources) == (None, [], None)


def test_an_unknown_backend_lists_the_registered_ones(write: Write) -> None:
    path = write("agents:\n  l: {provider: {kind: scripted, script: []}, backend: local}\n")
    with pytest.raises(InvalidConfigError) as info:
        load_config(path)
    assert "unknown backend 'local'; valid backends: docker, kubernetes, process" in str(info.value)


def test_credential_injections_compile_to_layer0(write: Write) -> None:
    path = write(
        """
        secrets:
          a: {env: A_VAR}
          b: {file: /run/keys/b}
        agents:
          x:
            provider: {kind: scripted, script: []}
            credentials:
              - {secret: a, inject: {env_var: A}}
              - {secret: b, inject: {file: /run/secrets/b}}
        """
    )
    creds = load_config(path).agent("x").environment.credentials
    assert [c.model_dump(mode="json") for c in creds] == [
        {"name": "a", "injection": {"env_var": {"var_name": "A"}}},
        {"name": "b", "injection": {"file": {"path": "/run/secrets/b"}}},
    ]


async def test_config_secret_resolver(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("file-value\n")
    resolver = ConfigSecretResolver(
        {"e": SecretSource(env="MY_SECRET"), "f": SecretSource(file=str(key)),
         "gone": SecretSource(file=str(tmp_path / "none"))},
        environ={"MY_SECRET": "env-value"},
    )  # fmt: skip
    assert isinstance(resolver, SecretResolver)
    assert await resolver.get("e") == "env-value"
    assert await resolver.get("f") == "file-value"
    assert await resolver.get("gone") is None
    assert await resolver.get("undeclared") is None
    assert resolver.describe("e") == "env $MY_SECRET"
    with pytest.raises(EnvError, match=r"secret 'gone' not found \(looked in: file "):
        await resolve_secret(ChainResolver(resolver), "gone")
    (tmp_path / "dir").mkdir()
    with pytest.raises(EnvError, match="cannot read"):
        await ConfigSecretResolver({"d": SecretSource(file=str(tmp_path / "dir"))}).get("d")
