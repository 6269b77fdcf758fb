"""Authenticator: the bootstrap token, API keys, OIDC tokens, and the Bearer scheme."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airlock.identity import (
    DEFAULT_TENANT,
    Authenticator,
    KeyStore,
    OidcSettings,
    OidcVerifier,
    Permission,
    RoleBook,
    Unauthenticated,
)

from .tokens import AUDIENCE, ISSUER, SigningKey, jwks

BOOTSTRAP = "b" * 43
ROLES = RoleBook()


@dataclass
class Setup:
    auth: Authenticator
    key_text: str
    key_id: str
    signing: SigningKey
    keys: KeyStore


@pytest.fixture(scope="module")
def signing() -> SigningKey:
    return SigningKey("k1")


@pytest.fixture
async def setup(tmp_path: Path, signing: SigningKey) -> AsyncIterator[Setup]:
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(signing)))
    oidc = OidcVerifier(
        OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=tmp_path / "jwks.json"), ROLES
    )
    async with KeyStore(tmp_path / "keys.db", ROLES) as keys:
        record, text = await keys.create("ci", "team-a", ["submitter"], created_by="admin", expires_at=None)
        yield Setup(Authenticator(keys, oidc, ROLES, BOOTSTRAP, "root"), text, record.id, signing, keys)
    await oidc.aclose()


async def refusal(auth: Authenticator, value: str) -> str:
    with pytest.raises(Unauthenticated) as info:
        await auth.authenticate(value)
    return info.value.reason


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_the_bootstrap_token_is_the_administrator(setup: Setup, scheme: str) -> None:
    principal = await setup.auth.authenticate(f"{scheme}  {BOOTSTRAP}")
    assert (principal.name, principal.tenant, principal.roles, principal.method) == (
        "root",
        DEFAULT_TENANT,
        ("admin",),
        "bootstrap",
    )
    assert principal.is_admin


async def test_a_rotated_bootstrap_token_is_read_each_call(setup: Setup) -> None:
    current = ["first-token"]

    async def token() -> str:
        return current[0]

    auth = Authenticator(None, None, ROLES, token)
    assert (await auth.authenticate("Bearer first-token")).method == "bootstrap"
    current[0] = "second-token"
    assert await refusal(auth, "Bearer first-token") == "invalid credentials"
    assert (await auth.authenticate("Bearer second-token")).name == "admin"


async def test_an_api_key_is_its_principal_with_grants(setup: Setup) -> None:
    principal = await setup.auth.authenticate(f"Bearer {setup.key_text}")
    assert (principal.name, principal.tenant, principal.method, principal.key_id) == (
        "ci",
        "team-a",
        "key",
        setup.key_id,
    )
    assert {g.permission for g in principal.grants} == {Permission.SUBMIT, Permission.OWN_JOBS}


async def test_a_revoked_key_is_refused_on_the_next_call(setup: Setup) -> None:
    await setup.auth.authenticate(f"Bearer {setup.key_text}")
    await setup.keys.revoke(setup.key_id, "root")
    assert await refusal(setup.auth, f"Bearer {setup.key_text}") == "invalid or expired API key"


async def test_an_oidc_token_is_its_principal(setup: Setup) -> None:
    principal = await setup.auth.authenticate(f"Bearer {setup.signing.token(roles=['viewer'])}")
    assert (principal.name, principal.method, principal.roles) == ("alice", "oidc", ("viewer",))
    assert principal.grants and principal.grants[0].permission is Permission.READ


async def test_oidc_refusals_say_why(setup: Setup) -> None:
    assert await refusal(setup.auth, f"Bearer {setup.signing.token(aud='x')}") == "wrong audience"


async def test_a_jwt_without_oidc_configured_is_invalid(setup: Setup) -> None:
    auth = Authenticator(setup.keys, None, ROLES, BOOTSTRAP)
    assert await refusal(auth, f"Bearer {setup.signing.token()}") == "invalid credentials"


@pytest.mark.parametrize("value", ["", "   ", "Bearer", "Bearer   "])
async def test_missing_credentials(setup: Setup, value: str) -> None:
    assert await refusal(setup.auth, value) == (
        "missing credentials: send 'authorization: Bearer <key or token>' metadata"
    )


@pytest.mark.parametrize("value", [f"Basic {BOOTSTRAP}", f"Token {BOOTSTRAP}", "Bearer nope", f"{BOOTSTRAP}"])
async def test_other_schemes_and_unknown_credentials_are_invalid(setup: Setup, value: str) -> None:
    assert await refusal(setup.auth, value) == "invalid credentials"


async def test_a_key_lookalike_without_a_store_is_invalid(setup: Setup) -> None:
    auth = Authenticator(None, None, ROLES, BOOTSTRAP)
    assert await refusal(auth, f"Bearer {setup.key_text}") == "invalid credentials"
