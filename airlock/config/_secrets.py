"""A SecretResolver reading the sources declared under ``secrets:`` (controller side only)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from airlock.policy.secrets import read_secret_file

from ._schema import SecretSource


class ConfigSecretResolver:
    """Resolves secret names through the configuration's ``secrets:`` sources.

    Implements ``airlock.policy.SecretResolver``; a name the configuration
    does not declare resolves to None, so it chains with other resolvers.
    """

    def __init__(self, sources: Mapping[str, SecretSource], environ: Mapping[str, str] | None = None) -> None:
        """Args:
        sources: Secret name → source (``AirlockConfig.secrets``).
        environ: The environment for ``env`` sources (default: ``os.environ`` at lookup time).
        """
        self._sources = dict(sources)
        self._environ = environ

    async def get(self, name: str) -> str | None:
        """The secret's value, or None when undeclared, unset or empty.

        Raises:
            EnvError: ``credential_failed`` when a declared file cannot be read (naming the
                secret and the file, never a value).
        """
        source = self._sources.get(name)
        if source is None:
            return None
        if source.env is not None:
            environ = os.environ if self._environ is None else self._environ
            return environ.get(source.env) or None
        assert source.file is not None
        return await read_secret_file(name, source.file)

    def describe(self, name: str) -> str:
        """Where ``name`` is looked up (``env $VAR`` / ``file PATH``), never its value."""
        source = self._sources.get(name)
        return source.describe() if source is not None else f"not declared in secrets: ({name})"
