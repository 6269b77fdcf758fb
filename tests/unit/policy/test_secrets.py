"""Secret resolvers and redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.policy.secrets import (
    REDACTED,
    ChainResolver,
    EnvSecretResolver,
    FileSecretResolver,
    SecretResolver,
    env_var_for,
    read_secret_file,
    redact,
    resolve_secret,
)
from layer0 import EnvError

VALUE = "sk-ant-test-0123456789abcdef"


def test_env_var_convention() -> None:
    assert env_var_for("anthropic-api-key") == "ANTHROPIC_API_KEY"
    assert env_var_for("gh.token", "AIRLOCK_SECRET_") == "AIRLOCK_SECRET_GH_TOKEN"


async def test_env_resolver_convention_mapping_prefix() -> None:
    env = {"ANTHROPIC_API_KEY": VALUE, "MY_GH": "gh-value", "S_PYPI_TOKEN": "pypi-value", "EMPTY": ""}
    r = EnvSecretResolver(env)
    assert isinstance(r, SecretResolver)
    assert await r.get("anthropic-api-key") == VALUE
    assert await r.get("missing") is None
    assert await EnvSecretResolver(env, mapping={"gh": "MY_GH"}).get("gh") == "gh-value"
    assert await EnvSecretResolver(env, prefix="S_").get("pypi-token") == "pypi-value"
    assert await EnvSecretResolver(env, mapping={"e": "EMPTY"}).get("e") is None
    assert r.describe("anthropic-api-key") == "env $ANTHROPIC_API_KEY"


async def test_env_resolver_defaults_to_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_TEST_SECRET_X", "from-process-env")
    assert await EnvSecretResolver(prefix="AIRLOCK_TEST_SECRET_").get("x") == "from-process-env"


async def test_file_resolver(tmp_path: Path) -> None:
    (tmp_path / "anthropic-api-key").write_text(VALUE + "\n")
    (tmp_path / "empty").write_text("\n")
    r = FileSecretResolver(tmp_path)
    assert await r.get("anthropic-api-key") == VALUE
    assert await r.get("nope") is None
    assert await r.get("empty") is None
    assert await r.get("../etc/passwd") is None  # never leaves the directory
    (tmp_path / "adir").mkdir()
    with pytest.raises(EnvError) as info:
        await r.get("adir")
    assert info.value.kind == "credential_failed"


async def test_read_secret_file_trims_the_newline_and_names_the_file_on_error(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text(VALUE + "\r\n")
    assert await read_secret_file("key", secret) == VALUE
    assert await read_secret_file("key", str(secret)) == VALUE
    assert await read_secret_file("gone", tmp_path / "gone") is None
    secret.write_text("\n")
    assert await read_secret_file("key", secret) is None
    secret.write_bytes(b"\xff" + VALUE.encode())
    with pytest.raises(EnvError) as info:
        await read_secret_file("key", secret)
    assert info.value.kind == "credential_failed"
    assert "'key'" in str(info.value) and str(secret) in str(info.value)
    assert VALUE not in str(info.value)


async def test_chain_and_resolve_secret_error_names_the_secret_not_a_value(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("file-b-value")
    chain = ChainResolver(
        EnvSecretResolver({"A": "env-a-value", "B": "env-b-value"}), FileSecretResolver(tmp_path)
    )
    assert await resolve_secret(chain, "a") == "env-a-value"
    assert await resolve_secret(chain, "b") == "env-b-value"  # first resolver wins
    with pytest.raises(EnvError) as info:
        await resolve_secret(chain, "anthropic-api-key")
    err = info.value
    assert err.kind == "credential_failed"
    text = str(err)
    assert "'anthropic-api-key' not found" in text
    assert "env $ANTHROPIC_API_KEY" in text and str(tmp_path / "anthropic-api-key") in text
    assert "env-a-value" not in text and "file-b-value" not in text


def test_redact() -> None:
    other = "tok-abcdef"
    text = f"header x-api-key: {VALUE}; again {VALUE}{other} short=abc"
    out = redact(text, [VALUE, other, "abc", ""])
    assert VALUE not in out and other not in out
    assert out == f"header x-api-key: {REDACTED}; again {REDACTED}{REDACTED} short=abc"
    assert redact("abcdefgh", ["abcd", "abcdefgh"]) == REDACTED  # longest first
