"""OidcVerifier: tokens minted locally with test keys, a JWKS file and a JWKS served on 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airlock.identity import (
    OidcClaims,
    OidcSettings,
    OidcVerifier,
    Permission,
    RoleBook,
    RoleDefinition,
    Unauthenticated,
)

from .tokens import AUDIENCE, ISSUER, SigningKey, hmac_token, jwks, unsigned_token

ROLES = RoleBook({"team-a-approver": RoleDefinition(grants=("approver",), agents=("a-*",))})


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey("k1")


@pytest.fixture(scope="module")
def other() -> SigningKey:
    return SigningKey("k1")  # the same kid, another key pair: a forged signature


def write_jwks(path: Path, *keys: SigningKey) -> None:
    """Replace the JWKS file at once (a new inode, as a rotation tool does)."""
    staged = path.with_suffix(".new")
    staged.write_text(json.dumps(jwks(*keys)))
    os.replace(staged, path)


def settings(jwks_file: Path, **claims: Any) -> OidcSettings:
    return OidcSettings(
        issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file, leeway_s=0, claims=OidcClaims(**claims)
    )


@pytest.fixture
async def verifier(tmp_path: Path, key: SigningKey) -> AsyncIterator[OidcVerifier]:
    write_jwks(tmp_path / "jwks.json", key)
    found = OidcVerifier(settings(tmp_path / "jwks.json"), ROLES, file_check_every_s=0)
    yield found
    await found.aclose()


async def refusal(verifier: OidcVerifier, token: str) -> str:
    with pytest.raises(Unauthenticated) as info:
        await verifier.verify(token)
    return info.value.reason


async def test_a_good_token_is_its_principal(verifier: OidcVerifier, key: SigningKey) -> None:
    principal = await verifier.verify(key.token(roles=["viewer", "unknown-group"]))
    assert (principal.name, principal.tenant, principal.roles, principal.method) == (
        "alice",
        "team-a",
        ("viewer",),
        "oidc",
    )
    assert [g.permission for g in principal.grants] == [Permission.READ]


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"iss": "https://evil.test"}, "wrong issuer"),
        ({"aud": "someone-else"}, "wrong audience"),
        ({"exp": 1_000_000}, "token expired"),
        ({"nbf": 4_000_000_000}, "token not yet valid"),
        ({"exp": None}, "token lacks the 'exp' claim"),
        ({"aud": None}, "token lacks the 'aud' claim"),
        ({"iat": None}, "token lacks the 'iat' claim"),
    ],
)
async def test_a_token_with_bad_claims_is_refused_saying_why(
    verifier: OidcVerifier, key: SigningKey, claims: dict[str, Any], reason: str
) -> None:
    assert await refusal(verifier, key.token(**claims)) == reason


async def test_a_signature_of_another_key_is_refused(verifier: OidcVerifier, other: SigningKey) -> None:
    assert await refusal(verifier, other.token()) == "bad signature"


async def test_an_unsigned_token_is_refused(verifier: OidcVerifier) -> None:
    assert await refusal(verifier, unsigned_token("k1")) == "algorithm 'none' not allowed"


async def test_the_public_key_as_an_hmac_secret_is_refused(verifier: OidcVerifier, key: SigningKey) -> None:
    token = hmac_token(key.public_pem(), "k1")
    assert await refusal(verifier, token) == "algorithm 'HS256' not allowed"


async def test_an_algorithm_the_key_does_not_fit_is_refused(tmp_path: Path) -> None:
    ec_key = SigningKey("ec", kind="EC")
    write_jwks(tmp_path / "jwks.json", ec_key)
    verifier = OidcVerifier(settings(tmp_path / "jwks.json"), ROLES)
    rsa_signed = SigningKey("ec").token()  # RS256 under the EC key's id
    assert await refusal(verifier, rsa_signed) == "signing key does not fit the token's algorithm"
    assert (await verifier.verify(ec_key.token())).name == "alice"


async def test_an_unknown_key_id_and_garbage_are_refused(verifier: OidcVerifier) -> None:
    assert await refusal(verifier, SigningKey("k9").token()) == "unknown signing key"
    assert await refusal(verifier, "a.b.c") == "malformed token"


async def test_a_rotation_in_the_jwks_file_is_seen(
    tmp_path: Path, key: SigningKey, verifier: OidcVerifier
) -> None:
    old_token = key.token()
    assert (await verifier.verify(old_token)).name == "alice"
    rotated = SigningKey("k2")
    write_jwks(tmp_path / "jwks.json", rotated)  # k2 added, k1 removed
    assert (await verifier.verify(rotated.token(sub="bob"))).name == "bob"
    assert await refusal(verifier, old_token) == "unknown signing key"


async def test_claims_map_to_name_tenant_and_roles(tmp_path: Path, key: SigningKey) -> None:
    write_jwks(tmp_path / "jwks.json", key)
    mapped = settings(
        tmp_path / "jwks.json",
        name="email",
        tenant="org",
        default_tenant="shared",
        roles="groups",
        role_map={"idp-approvers": ("team-a-approver", "viewer")},
    )
    verifier = OidcVerifier(mapped, ROLES)
    token = key.token(email="carol@example.com", org="team-b", groups=["idp-approvers", "submitter", "x"])
    principal = await verifier.verify(token)
    assert (principal.name, principal.tenant, principal.roles) == (
        "carol@example.com",
        "team-b",
        ("team-a-approver", "viewer", "submitter"),
    )
    assert (await verifier.verify(key.token(email="d@example.com"))).tenant == "shared"
    assert await refusal(verifier, key.token()) == "token names no usable principal (claim 'email')"


async def test_a_token_without_a_usable_tenant_is_refused(tmp_path: Path, key: SigningKey) -> None:
    write_jwks(tmp_path / "jwks.json", key)
    verifier = OidcVerifier(settings(tmp_path / "jwks.json"), ROLES)
    assert await refusal(verifier, key.token(tenant=None)) == "token names no usable tenant (claim 'tenant')"
    assert (
        await refusal(verifier, key.token(tenant="Team A")) == "token names no usable tenant (claim 'tenant')"
    )
    bad_tenant = "token names no usable tenant (claim 'tenant')"
    assert await refusal(verifier, key.token(tenant="team-a\n")) == bad_tenant
    assert (
        await refusal(verifier, key.token(sub="alice\n")) == "token names no usable principal (claim 'sub')"
    )
    no_claim = OidcVerifier(settings(tmp_path / "jwks.json", tenant=None), ROLES)
    assert (await no_claim.verify(key.token(tenant="ignored"))).tenant == "default"


# --- a JWKS served over HTTP by the test, on 127.0.0.1 ---------------------------------------


class JwksServer:
    """Serves ``document`` at /jwks and counts the requests."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {"keys": []}
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body = json.dumps(server.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/jwks"


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    server = JwksServer()
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    yield server
    server.http.shutdown()
    server.http.server_close()


def url_settings(url: str) -> OidcSettings:
    return OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url)


async def test_a_jwks_url_is_fetched_once_and_refetched_for_a_new_key_at_most_once_a_minute(
    jwks_server: JwksServer, key: SigningKey
) -> None:
    jwks_server.document = jwks(key)
    verifier = OidcVerifier(url_settings(jwks_server.url), ROLES)
    try:
        for _ in range(3):
            assert (await verifier.verify(key.token())).name == "alice"
        assert jwks_server.requests == 1
        for kid in ("n1", "n2", "n3"):
            assert await refusal(verifier, SigningKey(kid).token()) == "unknown signing key"
        assert jwks_server.requests == 1  # fetched less than a minute ago: not again
    finally:
        await verifier.aclose()


async def test_a_jwks_url_rotation_is_seen_on_an_unknown_key(
    jwks_server: JwksServer, key: SigningKey
) -> None:
    jwks_server.document = jwks(key)
    verifier = OidcVerifier(url_settings(jwks_server.url), ROLES, refetch_every_s=0)
    try:
        assert (await verifier.verify(key.token())).name == "alice"
        rotated = SigningKey("k2")
        jwks_server.document = jwks(rotated)
        assert (await verifier.verify(rotated.token(sub="bob"))).name == "bob"
        assert jwks_server.requests == 2
    finally:
        await verifier.aclose()


async def test_an_unreachable_jwks_url_refuses_tokens(key: SigningKey, jwks_server: JwksServer) -> None:
    url = jwks_server.url
    jwks_server.http.shutdown()
    jwks_server.http.server_close()
    verifier = OidcVerifier(url_settings(url), ROLES, timeout_s=1)
    try:
        reason = await refusal(verifier, key.token())
        assert reason == "the identity provider's signing keys are unavailable"
    finally:
        await verifier.aclose()
