"""Credentials end to end through ``Controller`` (the object ``airlock serve`` runs: real gRPC,
the data dir's stores, its ``auth:`` settings): an administrator's API key for a principal is
shown once and kept only as a hash, works until revoked or expired and then answers as a key
that never existed; an OIDC token of the configured issuer is its principal, and a bad one is
refused saying why."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions, _execute
from airlock.jobs import AuditRecord, ControllerClient, ControllerError
from tests.unit.identity.tokens import AUDIENCE, ISSUER, SigningKey, jwks


@pytest.fixture
def idp() -> SigningKey:
    return SigningKey("k1")


@pytest.fixture(autouse=True)
def no_reap(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_reap(self: Any) -> list[str]:  # recovery must not touch this machine's Docker
        return []

    monkeypatch.setattr(_execute.AgentRunner, "reap", no_reap)


def write_config(tmp_path: Path, idp: SigningKey, **extra: Any) -> Path:
    """airlock.yaml with one agent and ``auth:`` (OIDC of ``idp``, a role, ``extra``)."""
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(idp)))
    (tmp_path / "s.yaml").write_text("steps: []\n")
    agent = {"provider": {"kind": "scripted", "script": "s.yaml"}, "backend": "process"}
    auth = {
        "oidc": {
            "issuer": ISSUER,
            "audience": AUDIENCE,
            "jwks_file": "jwks.json",
            "claims": {"roles": "groups"},
        },
        "roles": {"ops-approver": {"grants": ["approver"], "agents": ["ops-*"]}},
        **extra,
    }
    path = tmp_path / "airlock.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "agents": {"a": agent}, "auth": auth}))
    return path


@pytest.fixture
async def controller(tmp_path: Path, idp: SigningKey) -> AsyncIterator[Controller]:
    options = ControllerOptions(data_dir=tmp_path / "data", address="127.0.0.1:0")
    async with Controller(load_config(write_config(tmp_path, idp)), options) as started:
        yield started


async def _refusal(address: str, credential: str) -> ControllerError:
    async with ControllerClient(address, credential) as client:
        with pytest.raises(ControllerError) as caught:
            await client.whoami()
    assert caught.value.code == "UNAUTHENTICATED"
    return caught.value


async def test_a_key_is_shown_once_kept_hashed_and_refused_once_revoked(
    controller: Controller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with ControllerClient(controller.address, controller.token) as admin:
        key, secret = await admin.create_key("kim", "red", ["submitter", "ops-approver"])
        async with ControllerClient(controller.address, secret) as kim:
            me = await kim.whoami()
            assert (me.name, me.tenant, me.method, me.roles) == (
                "kim",
                "red",
                "key",
                ("submitter", "ops-approver"),
            )
            assert ("jobs.approve", ("ops-*",)) in me.grants
            with pytest.raises(ControllerError) as denied:
                await kim.keys()
            assert (
                denied.value.code == "PERMISSION_DENIED"
                and denied.value.metadata["permission"] == "controller.admin"
            )
        listed = await admin.keys()
        assert [(k.id, k.name, k.tenant, k.created_by) for k in listed] == [(key.id, "kim", "red", "admin")]
        revoked = await admin.revoke_key(key.id)
        assert revoked.revoked_at is not None and await admin.keys() == []
    stored = b"".join(p.read_bytes() for p in controller.data_dir.rglob("*") if p.is_file())
    assert secret.encode() not in stored and secret not in caplog.text
    secret_part = secret.removeprefix(f"ak_{key.id}_")
    assert secret == f"ak_{key.id}_{secret_part}" and len(secret_part) >= 40
    assert secret_part.encode() not in stored and secret_part not in caplog.text
    after = await _refusal(controller.address, secret)
    never = await _refusal(controller.address, f"ak_{key.id}_{'x' * len(secret_part)}")
    made_up = await _refusal(controller.address, "ak_0123456789ab_" + "y" * len(secret_part))
    assert str(after) == str(never) == str(made_up) and "invalid or expired API key" in str(after)


async def test_an_expired_key_is_refused(controller: Controller) -> None:
    async with ControllerClient(controller.address, controller.token) as admin:
        _, secret = await admin.create_key("tmp", "red", ["viewer"], ttl_s=1)
    async with ControllerClient(controller.address, secret) as tmp:
        assert (await tmp.whoami()).name == "tmp"
    await asyncio.sleep(1.2)
    assert "invalid or expired API key" in str(await _refusal(controller.address, secret))


async def test_an_oidc_token_is_its_principal_and_a_bad_one_says_why(
    controller: Controller, idp: SigningKey
) -> None:
    token = idp.token(sub="olga", tenant="red", groups=["viewer", "ops-approver"])
    async with ControllerClient(controller.address, token) as olga:
        me = await olga.whoami()
        assert (me.name, me.tenant, me.method, me.roles) == (
            "olga",
            "red",
            "oidc",
            ("viewer", "ops-approver"),
        )
        assert await olga.find() == []
    assert "expired" in str(await _refusal(controller.address, idp.token(exp=1)))
    assert "audience" in str(await _refusal(controller.address, idp.token(aud="someone-else")))
    impostor = SigningKey("k1")
    assert "signature" in str(await _refusal(controller.address, impostor.token(sub="olga")))


async def test_the_bootstrap_token_is_the_administrator(controller: Controller) -> None:
    async with ControllerClient(controller.address, controller.token) as admin:
        me = await admin.whoami()
    assert (me.name, me.tenant, me.method, me.roles) == ("admin", "default", "bootstrap", ("admin",))


async def test_a_change_of_the_quotas_is_audited_once(tmp_path: Path, idp: SigningKey) -> None:
    options = ControllerOptions(data_dir=tmp_path / "data", address="127.0.0.1:0")

    async def audited(config: Path) -> list[AuditRecord]:
        async with (
            Controller(load_config(config), options) as started,
            ControllerClient(started.address, started.token) as admin,
        ):
            return await admin.audit(action="QuotasChanged")

    path = write_config(tmp_path, idp)
    (first,) = await audited(path)
    assert first.principal == f"config:{path}" and '"tenants": {}' in first.detail
    assert len(await audited(path)) == 1  # unchanged: no new entry
    path = write_config(tmp_path, idp, tenants={"red": {"quotas": {"concurrent_jobs": 2}}})
    latest, earlier = await audited(path)
    assert '"red": {' in latest.detail and '"concurrent_jobs": 2' in latest.detail and earlier == first
