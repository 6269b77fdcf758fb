"""Where the controller keeps its data by default."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir() -> Path:
    """``$AIRLOCK_DATA_DIR``, else ``$XDG_STATE_HOME/airlock/controller``, else
    ``~/.local/state/airlock/controller``: the job store, the state store and the token."""
    explicit = os.environ.get("AIRLOCK_DATA_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "airlock" / "controller"
