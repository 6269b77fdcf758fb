"""Where the local model, the runtime wheel, its venv and server state live."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR_ENV = "AIRLOCK_CACHE_DIR"


@dataclass(frozen=True)
class CachePaths:
    """The cache layout under one root (default ``~/.cache/airlock``, env ``AIRLOCK_CACHE_DIR``)."""

    root: Path

    @classmethod
    def default(cls) -> CachePaths:
        """The root from ``$AIRLOCK_CACHE_DIR``, else ``~/.cache/airlock``."""
        env = os.environ.get(CACHE_DIR_ENV)
        root = Path(env).expanduser() if env else Path.home() / ".cache" / "airlock"
        return cls(root=root)

    @property
    def models_dir(self) -> Path:
        """Verified model files (``*.gguf``) and their verification stamps."""
        return self.root / "models"

    @property
    def wheels_dir(self) -> Path:
        """Cached wheels: the locally built llama-cpp-python and its dependencies."""
        return self.root / "wheels"

    @property
    def localmodel_dir(self) -> Path:
        """The runtime venv, server state files and server logs."""
        return self.root / "localmodel"

    @property
    def venv_dir(self) -> Path:
        """The dedicated venv holding llama-cpp-python (airlock itself is not installed there)."""
        return self.localmodel_dir / "venv"

    @property
    def venv_python(self) -> Path:
        """The venv's interpreter."""
        return self.venv_dir / "bin" / "python"

    @property
    def servers_dir(self) -> Path:
        """One state file and one log per served address."""
        return self.localmodel_dir / "servers"
