"""OidcVerifier: an OIDC provider's JWTs verified offline (PyJWT) and mapped to principals."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ._errors import Unauthenticated
from ._jwks import Jwk, JwksFile, JwksUrl, KeySource
from ._principal import DEFAULT_TENANT, Principal
from ._roles import RoleBook
from ._settings import NAME_PATTERN, OidcSettings

if TYPE_CHECKING:
    import jwt

_TENANT = re.compile(NAME_PATTERN)
#: A principal name from a token: printable, no spaces, not too long.
_NAME = re.compile(r"^[\x21-\x7e]{1,256}$")
#: Claims every accepted token carries.
_REQUIRED = ["exp", "iat", "iss", "aud"]


def _reason(error: Exception) -> str:
    """A short reason, safe to return, for a token PyJWT refused."""
    import jwt

    reasons: list[tuple[type[Exception], str]] = [
        (jwt.ExpiredSignatureError, "token expired"),
        (jwt.ImmatureSignatureError, "token not yet valid"),
        (jwt.InvalidAudienceError, "wrong audience"),
        (jwt.InvalidIssuerError, "wrong issuer"),
        (jwt.InvalidIssuedAtError, "token issued in the future"),
        (jwt.InvalidSignatureError, "bad signature"),
        (jwt.InvalidAlgorithmError, "algorithm not allowed"),
        (jwt.InvalidKeyError, "signing key does not fit the token's algorithm"),
    ]
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"token lacks the {error.claim!r} claim"
    for kind, reason in reasons:
        if isinstance(error, kind):
            return reason
    return "malformed token"


class OidcVerifier:
    """Verifies a bearer JWT against ``settings`` (issuer, audience, algorithms, JWKS) and maps
    its claims to a resolved :class:`Principal` (method ``oidc``).

    Only ``settings.algorithms`` are accepted (asymmetric ones: never ``none`` nor HMAC, so a
    public key can never serve as an HMAC secret), the key is the JWKS's key of the token's
    ``kid``, and ``exp``, ``iat``, ``iss`` and ``aud`` are required.
    """

    def __init__(
        self,
        settings: OidcSettings,
        roles: RoleBook,
        *,
        refetch_every_s: float = 60.0,
        file_check_every_s: float = 1.0,
        timeout_s: float = 5.0,
    ) -> None:
        self._settings = settings
        self._roles = roles
        self._source: KeySource
        if settings.jwks_file is not None:
            self._source = JwksFile(settings.jwks_file, check_every_s=file_check_every_s)
        else:
            assert settings.jwks_url is not None  # exactly one source: validated
            self._source = JwksUrl(settings.jwks_url, timeout_s=timeout_s, refetch_every_s=refetch_every_s)
        self._keys: dict[tuple[str, str], tuple[Jwk, jwt.PyJWK]] = {}

    async def aclose(self) -> None:
        """Release the JWKS source (its HTTP client)."""
        await self._source.aclose()

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` names.

        Raises:
            Unauthenticated: the token is malformed, expired, not yet valid, for another issuer
                or audience, signed by an unknown key or with a refused algorithm, or names no
                usable principal or tenant (the reason says which).
        """
        claims = await self._claims(token)
        return self._roles.resolve(self._principal(claims))

    async def _claims(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("malformed token") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self._settings.algorithms:
            raise Unauthenticated(f"algorithm {str(alg)[:16]!r} not allowed")
        if not isinstance(kid, str):
            raise Unauthenticated("token names no signing key (kid)")
        key = await self._key(kid, alg)
        settings = self._settings
        try:
            return jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_s,
                options={"require": _REQUIRED},
            )
        except jwt.PyJWTError as e:
            raise Unauthenticated(_reason(e)) from None

    async def _key(self, kid: str, alg: str) -> Any:
        """The public key of ``kid`` for ``alg`` (its JWK's ``alg``, when it names one, must match)."""
        import jwt

        jwk = await self._source.key(kid)
        if jwk is None:
            raise Unauthenticated("unknown signing key")
        cached = self._keys.get((kid, alg))
        if cached is not None and cached[0] is jwk:
            return cached[1].key
        if jwk.get("alg", alg) != alg:
            raise Unauthenticated("signing key does not fit the token's algorithm")
        try:
            parsed = jwt.PyJWK(jwk, algorithm=alg)
        except jwt.PyJWTError:
            raise Unauthenticated("signing key does not fit the token's algorithm") from None
        if len(self._keys) > 64:
            self._keys.clear()
        self._keys[(kid, alg)] = (jwk, parsed)
        return parsed.key

    def _principal(self, claims: dict[str, Any]) -> Principal:
        mapping = self._settings.claims
        name = claims.get(mapping.name)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise Unauthenticated(f"token names no usable principal (claim {mapping.name!r})")
        tenant = claims.get(mapping.tenant) if mapping.tenant is not None else None
        if tenant is None:
            tenant = mapping.default_tenant or (DEFAULT_TENANT if mapping.tenant is None else None)
        if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
            raise Unauthenticated(f"token names no usable tenant (claim {mapping.tenant!r})")
        return Principal(name, tenant, self._role_names(claims.get(mapping.roles)), "oidc")

    def _role_names(self, values: Any) -> tuple[str, ...]:
        """The roles that the roles claim's values map to (``role_map``), or that they name."""
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list):
            return ()
        known = self._roles.names
        roles: list[str] = []
        for value in values:
            if not isinstance(value, str):
                continue
            if value in self._settings.claims.role_map:
                roles += self._settings.claims.role_map[value]
            elif value in known:
                roles.append(value)
        return tuple(dict.fromkeys(roles))
