"""Test signing keys, their JWKS and locally minted tokens (the test's own issuer)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.test"
AUDIENCE = "airlock"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class SigningKey:
    """A key pair with a key id."""

    kid: str
    kind: str = "RSA"
    private: Any = field(init=False)

    def __post_init__(self) -> None:
        if self.kind == "RSA":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())

    @property
    def alg(self) -> str:
        return "RS256" if self.kind == "RSA" else "ES256"

    def jwk(self) -> dict[str, Any]:
        to_jwk = RSAAlgorithm.to_jwk if self.kind == "RSA" else ECAlgorithm.to_jwk
        return {**to_jwk(self.private.public_key(), as_dict=True), "kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def token(self, alg: str | None = None, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A token signed by this key; standard claims are valid unless overridden (None: left out)."""
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice",
            "iat": now,
            "exp": now + 300,
            "tenant": "team-a",
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(
            body, self.private, algorithm=alg or self.alg, headers={"kid": self.kid, **(headers or {})}
        )


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [k.jwk() for k in keys]}


def unsigned_token(kid: str, **claims: Any) -> str:
    """An ``alg: none`` token (no signature)."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "iat": now, "exp": now + 300, **claims}
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
    return f"{header}.{_b64(json.dumps(body).encode())}."


def hmac_token(secret: bytes, kid: str) -> str:
    """An HS256 token whose HMAC secret is ``secret`` (e.g. an RSA public key's PEM)."""
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "mallory",
        "iat": now,
        "exp": now + 300,
        "tenant": "team-a",
    }
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    signing_input = f"{header}.{_b64(json.dumps(body).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"
