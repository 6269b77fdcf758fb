"""Secret resolution (pluggable) and redaction.

A credential is named in the spec (``anthropic-api-key``); its value is looked up at
provisioning time by a :class:`SecretResolver`:

- :class:`EnvSecretResolver`: the controller's environment; ``anthropic-api-key`` is read
  from ``ANTHROPIC_API_KEY`` (upper case, every non-alphanumeric character becomes ``_``,
  optional prefix), or from an explicit name mapping.
- :class:`FileSecretResolver`: a directory holding one file per secret, named exactly like
  the credential, read by :func:`read_secret_file` (trailing newline stripped).
- :class:`ChainResolver`: the first resolver that knows the name wins.

:func:`resolve_secret` raises ``layer0.EnvError.credential_failed`` naming the secret and
where it was looked for, never a value. :func:`redact` removes secret values from any text
before it is logged or emitted as an event.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from layer0 import EnvError

__all__ = [
    "REDACTED",
    "ChainResolver",
    "EnvSecretResolver",
    "FileSecretResolver",
    "SecretResolver",
    "env_var_for",
    "read_secret_file",
    "redact",
    "resolve_secret",
]

#: What :func:`redact` puts in place of a secret.
REDACTED = "[REDACTED]"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MIN_REDACT_LEN = 4


@runtime_checkable
class SecretResolver(Protocol):
    """Looks secret values up by credential name."""

    async def get(self, name: str) -> str | None:
        """The value of secret ``name``, or None when this resolver does not have it."""
        ...

    def describe(self, name: str) -> str:
        """Where this resolver looks for ``name`` (for error messages; never a value)."""
        ...


def env_var_for(name: str, prefix: str = "") -> str:
    """The variable conventionally holding secret ``name``: ``anthropic-api-key`` → ``ANTHROPIC_API_KEY``."""
    return prefix + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


class EnvSecretResolver:
    """Secrets from the controller's environment variables."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        mapping: Mapping[str, str] | None = None,
        prefix: str = "",
    ) -> None:
        """Args:
        environ: The environment to read (default: ``os.environ`` at lookup time).
        mapping: Explicit credential name → variable name entries (override the convention).
        prefix: Prepended to conventional variable names (e.g. ``AIRLOCK_SECRET_``).
        """
        self._environ = environ
        self._mapping = dict(mapping or {})
        self._prefix = prefix

    def _var(self, name: str) -> str:
        return self._mapping.get(name) or env_var_for(name, self._prefix)

    async def get(self, name: str) -> str | None:
        """The variable's value, or None when unset or empty."""
        environ = os.environ if self._environ is None else self._environ
        return environ.get(self._var(name)) or None

    def describe(self, name: str) -> str:
        """``env $VAR``."""
        return f"env ${self._var(name)}"


async def read_secret_file(name: str, path: str | os.PathLike[str]) -> str | None:
    """Secret ``name``'s value from the file ``path``, without its trailing newline.

    None when the file does not exist or holds nothing but a newline.

    Raises:
        EnvError: ``credential_failed`` when the file exists but cannot be read as UTF-8 text
            (naming the secret and the file, never a value).
    """
    path = Path(path)
    try:
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise EnvError.credential_failed(f"secret {name!r}: cannot read {path}: {type(e).__name__}") from e
    return text.rstrip("\r\n") or None


class FileSecretResolver:
    """Secrets from a directory: one file per secret, named like the credential."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)

    async def get(self, name: str) -> str | None:
        """The file's content without its trailing newline, or None if there is no such file."""
        if not _SAFE_NAME.match(name):
            return None  # never a path outside the directory
        return await read_secret_file(name, self._dir / name)

    def describe(self, name: str) -> str:
        """``file DIR/NAME``."""
        return f"file {self._dir / name}"


class ChainResolver:
    """Asks several resolvers in order; the first that has the secret wins."""

    def __init__(self, *resolvers: SecretResolver) -> None:
        self._resolvers = resolvers

    async def get(self, name: str) -> str | None:
        """The first value found, or None."""
        for resolver in self._resolvers:
            value = await resolver.get(name)
            if value is not None:
                return value
        return None

    def describe(self, name: str) -> str:
        """Every place looked at, in order."""
        return ", ".join(r.describe(name) for r in self._resolvers) or "no resolver"


async def resolve_secret(resolver: SecretResolver, name: str) -> str:
    """The value of secret ``name``.

    Raises:
        EnvError: ``credential_failed``, naming the secret and where it was looked for.
    """
    value = await resolver.get(name)
    if value is None:
        raise EnvError.credential_failed(f"secret {name!r} not found (looked in: {resolver.describe(name)})")
    return value


def redact(text: str, secrets: Iterable[str], placeholder: str = REDACTED) -> str:
    """``text`` with every occurrence of every secret replaced by ``placeholder``.

    Longer secrets are replaced first (one may contain another); values shorter than four
    characters are ignored, since replacing them would shred ordinary text without hiding
    anything worth hiding.
    """
    values = sorted({s for s in secrets if len(s) >= _MIN_REDACT_LEN}, key=len, reverse=True)
    for value in values:
        text = text.replace(value, placeholder)
    return text
