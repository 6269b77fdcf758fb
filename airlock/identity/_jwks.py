"""Where an OIDC provider's signing keys come from: a JWKS file (re-read when it changes) or a
JWKS URL (fetched, cached, fetched again for an unknown key id at most once a minute)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

import httpx

from ._errors import Unauthenticated

_log = logging.getLogger("airlock.identity")
#: A JWK as its JSON object.
Jwk = dict[str, Any]
#: A JWKS larger than this is refused (an IdP publishes a few keys).
_MAX_JWKS_BYTES = 1 << 20
_UNAVAILABLE = "the identity provider's signing keys are unavailable"


class KeySource(Protocol):
    """Answers the signing key (a JWK) of a key id, or None when the provider has none."""

    async def key(self, kid: str) -> Jwk | None: ...

    async def aclose(self) -> None: ...


def parse_jwks(data: bytes) -> dict[str, Jwk]:
    """The signing keys of a JWKS document by key id (keys without ``kid``, encryption keys
    and symmetric ``oct`` keys are left out). Raises ValueError for a document that is none."""
    if len(data) > _MAX_JWKS_BYTES:
        raise ValueError(f"a JWKS of {len(data)} bytes is over {_MAX_JWKS_BYTES}")
    document = json.loads(data)
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("a JWKS is a JSON object with a `keys` list")
    return {
        k["kid"]: k
        for k in keys
        if isinstance(k, dict)
        and isinstance(k.get("kid"), str)
        and k.get("use", "sig") == "sig"
        and k.get("kty") not in ("oct", None)
    }


class JwksFile:
    """Keys from a file, read again when its mtime, size or inode changes (key rotation):
    checked at most every ``check_every_s``, and at once for an unknown key id."""

    def __init__(self, path: Path, *, check_every_s: float = 1.0) -> None:
        self._path = path
        self._check_every = check_every_s
        self._keys: dict[str, Jwk] | None = None
        self._signature: tuple[int, int, int] | None = None
        self._next_check = 0.0

    async def key(self, kid: str) -> Jwk | None:
        now = time.monotonic()
        if self._keys is None or now >= self._next_check or kid not in self._keys:
            self._next_check = now + self._check_every
            await asyncio.to_thread(self._reload)
        if self._keys is None:
            raise Unauthenticated(_UNAVAILABLE)
        return self._keys.get(kid)

    def _reload(self) -> None:
        """Read the file if it changed (on a worker thread); a bad file keeps the keys read before."""
        try:
            st = os.stat(self._path)
            signature = (st.st_mtime_ns, st.st_size, st.st_ino)
            if signature == self._signature:
                return
            self._keys = parse_jwks(self._path.read_bytes())
            self._signature = signature
        except (OSError, ValueError) as e:
            _log.warning("cannot read the JWKS file %s: %s", self._path, e)

    async def aclose(self) -> None:
        """Nothing to release."""


class JwksUrl:
    """Keys fetched from a URL: cached for ``max_age_s``; an unknown key id fetches them again,
    at most once per ``refetch_every_s`` (a stream of made-up ids cannot flood the provider)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        refetch_every_s: float = 60.0,
        max_age_s: float = 3600.0,
    ) -> None:
        self._url = url
        self._client = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False)
        self._refetch_every = refetch_every_s
        self._max_age = max_age_s
        self._keys: dict[str, Jwk] | None = None
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()

    def _due(self, kid: str) -> bool:
        age = time.monotonic() - self._fetched_at
        if self._keys is None:  # never fetched: try again, at most once a second
            return age >= min(1.0, self._refetch_every)
        if age >= self._max_age:
            return True
        return kid not in self._keys and age >= self._refetch_every

    async def key(self, kid: str) -> Jwk | None:
        if self._due(kid):
            async with self._lock:
                if self._due(kid):  # not fetched by another call meanwhile
                    await self._fetch()
        if self._keys is None:
            raise Unauthenticated(_UNAVAILABLE)
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        self._fetched_at = time.monotonic()
        try:
            response = await self._client.get(self._url, headers={"accept": "application/json"})
            response.raise_for_status()
            self._keys = parse_jwks(response.content)
        except (httpx.HTTPError, ValueError) as e:
            _log.warning("cannot fetch the JWKS %s: %s", self._url, e)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
