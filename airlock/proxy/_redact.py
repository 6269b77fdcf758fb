"""Masking a secret in bytes that stream past: what an upstream echoes never reaches the sandbox.

:class:`SecretPatterns` holds the encodings a reflected secret takes (raw, the header value
as sent, JSON-escaped, percent-encoded); :meth:`SecretPatterns.mask` replaces each occurrence
with a mask byte of the same length, so ``Content-Length`` stays true. :class:`StreamRedactor`
does the same over a body that arrives in pieces: it holds back only the tail that is a
proper prefix of a pattern (normally nothing) and releases everything else at once, so its
output equals masking the whole body in one go while a stream is never delayed.
"""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

__all__ = ["SecretPatterns", "StreamRedactor"]

_MASKS = b"*#xX0"


def _forms(value: str) -> set[str]:
    escaped = json.dumps(value)[1:-1]
    quoted = {quote(value, safe=""), quote(value), quote_plus(value)}
    lower = {_lower_escapes(q) for q in quoted}
    return {
        value,
        escaped,
        json.dumps(value, ensure_ascii=False)[1:-1],
        escaped.replace("/", "\\/"),
        *quoted,
        *lower,
    }


def _lower_escapes(quoted: str) -> str:
    parts = quoted.split("%")
    return parts[0] + "".join(p[:2].lower() + p[2:] for p in parts[1:])


class SecretPatterns:
    """The byte patterns a secret (and its header value ``prefix + secret``) takes when echoed."""

    def __init__(self, secret: str, prefix: str = "") -> None:
        if not secret:
            raise ValueError("the secret must be non-empty")
        forms = _forms(secret) | (_forms(prefix + secret) if prefix else set())
        encoded = {f.encode("utf-8") for f in forms}
        #: Longest first.
        self.patterns: tuple[bytes, ...] = tuple(sorted(encoded, key=len, reverse=True))
        self.mask_byte = next((m for m in _MASKS if all(m not in p for p in self.patterns)), 0)
        self._prefixes = {p[:n] for p in self.patterns for n in range(1, len(p))}
        self._longest = len(self.patterns[0])

    def mark(self, data: bytes, masked: bytearray) -> int:
        """Set ``masked[i]`` for every byte of ``data`` inside an occurrence; return how many new ones."""
        found = 0
        for pattern in self.patterns:
            start = data.find(pattern)
            while start != -1:
                end = start + len(pattern)
                if 0 in masked[start:end]:
                    found += 1
                    masked[start:end] = b"\x01" * len(pattern)
                start = data.find(pattern, start + 1)
        return found

    def apply(self, data: bytes, masked: bytes | bytearray) -> bytes:
        """``data`` with every marked byte replaced by the mask byte."""
        if 1 not in masked:  # the usual case, decided in C
            return data
        return bytes(self.mask_byte if m else b for b, m in zip(data, masked, strict=True))

    def mask(self, data: bytes) -> tuple[bytes, int]:
        """``data`` with every occurrence masked, and the number of occurrences."""
        masked = bytearray(len(data))
        found = self.mark(data, masked)
        return self.apply(data, masked), found

    def held(self, data: bytes) -> int:
        """The length of the longest suffix of ``data`` that is a proper prefix of a pattern."""
        for n in range(min(len(data), self._longest - 1), 0, -1):
            if data[-n:] in self._prefixes:
                return n
        return 0


class StreamRedactor:
    """Masks :class:`SecretPatterns` across the pieces of one body (a :class:`~._http.BodyFilter`)."""

    def __init__(self, patterns: SecretPatterns) -> None:
        self._patterns = patterns
        self._raw = b""
        self._masked = bytearray()
        #: Occurrences masked so far.
        self.found = 0

    def feed(self, data: bytes) -> bytes:
        """Mask what can be decided now and return it; keep a possible pattern start back."""
        raw = self._raw + data
        masked = self._masked + bytearray(len(data))
        self.found += self._patterns.mark(raw, masked)
        keep = self._patterns.held(raw)
        cut = len(raw) - keep
        self._raw, self._masked = raw[cut:], masked[cut:]
        return self._patterns.apply(raw[:cut], masked[:cut])

    def flush(self) -> bytes:
        """Everything still held (the body ended: no pattern can complete any more)."""
        out = self._patterns.apply(self._raw, self._masked)
        self._raw, self._masked = b"", bytearray()
        return out
