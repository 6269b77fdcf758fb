"""The credential proxy's response rewriter: no reflected secret reaches the sandbox.

Every response head (interim ones too) has its header names, values and reason phrase
masked; the body goes through a :class:`~._redact.StreamRedactor`. The proxy asks upstream
for ``Accept-Encoding: identity``; a body that still comes compressed with ``gzip`` or
``deflate`` is decoded here (stdlib ``zlib``, bounded output per step) and relayed decoded,
without ``Content-Encoding`` and ``Content-Length``, so it can be checked and the response
still works. Any other content coding cannot be checked and is refused with a 502.
"""

from __future__ import annotations

import zlib

from ._http import BodyFilter, Headers, HttpError
from ._redact import SecretPatterns, StreamRedactor

__all__ = ["ResponseShield"]

_DECODABLE = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}
_STEP = 64 * 1024


class _Decoded:
    """A body filter that decompresses, then hands the plain bytes to ``inner``."""

    def __init__(self, wbits: int, inner: StreamRedactor) -> None:
        self._wbits = wbits
        self._z = zlib.decompressobj(wbits)
        self._inner = inner
        self._started = False

    def _decompress(self, data: bytes) -> bytes:
        out = []
        try:
            if not self._started and self._wbits == zlib.MAX_WBITS and data and (data[0] & 0x0F) != 8:
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send it
            self._started = self._started or bool(data)
            while data:
                out.append(self._inner.feed(self._z.decompress(data, _STEP)))
                data = self._z.unconsumed_tail
        except zlib.error as e:
            raise HttpError(502, f"upstream sent a corrupt compressed body ({e})") from e
        return b"".join(out)

    def feed(self, data: bytes) -> bytes:
        """Decode ``data`` and mask it."""
        return self._decompress(data)

    def flush(self) -> bytes:
        """The decoder's and the redactor's remainders."""
        try:
            rest = self._inner.feed(self._z.flush())
        except zlib.error as e:
            raise HttpError(502, f"upstream sent a corrupt compressed body ({e})") from e
        return rest + self._inner.flush()


class ResponseShield:
    """Masks one secret in every response of one exchange; ``found`` counts the occurrences."""

    def __init__(self, patterns: SecretPatterns) -> None:
        self._patterns = patterns
        self._bodies: list[StreamRedactor] = []
        self._head_found = 0

    @property
    def found(self) -> int:
        """Occurrences masked so far (heads and body)."""
        return self._head_found + sum(b.found for b in self._bodies)

    def _mask(self, value: bytes) -> bytes:
        masked, n = self._patterns.mask(value)
        self._head_found += n
        return masked

    def rewrite(
        self, status: int, headers: Headers, reason: bytes
    ) -> tuple[Headers, bytes, BodyFilter | None]:
        """The masked head and the body's filter.

        Raises:
            HttpError: 502 for a content coding that cannot be decoded.
        """
        headers = [(self._mask(k), self._mask(v)) for k, v in headers]
        codings = [
            c.strip().lower() for k, v in headers if k.lower() == b"content-encoding" for c in v.split(b",")
        ]
        codings = [c for c in codings if c and c != b"identity"]
        redactor = StreamRedactor(self._patterns)
        self._bodies.append(redactor)
        body: BodyFilter = redactor
        if codings:
            if len(codings) != 1 or codings[0] not in _DECODABLE:
                shown = b", ".join(codings).decode("latin-1")
                raise HttpError(502, f"upstream sent Content-Encoding {shown}, which the proxy cannot check")
            body = _Decoded(_DECODABLE[codings[0]], redactor)
            headers = [
                (k, v) for k, v in headers if k.lower() not in (b"content-encoding", b"content-length")
            ]
        return headers, self._mask(reason), body
