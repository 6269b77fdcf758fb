"""Finding and loading the configuration: explicit path, $AIRLOCK_CONFIG, ./airlock.yaml, ./airlock.d/."""

from __future__ import annotations

import os
from pathlib import Path

from airlock.errors import ConfigError

from ._load import compile_documents
from ._model import AirlockConfig
from ._yaml import load_yaml

#: Environment variable naming the configuration file or directory.
CONFIG_ENV = "AIRLOCK_CONFIG"
_SUFFIXES = (".yaml", ".yml")


def find_config(path: Path | None = None, *, cwd: Path | None = None) -> Path:
    """The configuration file or directory to load.

    Order: ``path`` if given, else ``$AIRLOCK_CONFIG``, else ``./airlock.yaml``, else
    ``./airlock.d/``.

    Raises:
        ConfigError: the named path does not exist, or nothing was found (the message
            lists every place looked at).
    """
    base = cwd or Path()  # relative paths stay relative in messages
    if path is not None:
        return _existing(base / path, "the given path")
    env = os.environ.get(CONFIG_ENV)
    if env:
        return _existing(base / Path(env).expanduser(), f"${CONFIG_ENV}")
    for candidate in (base / "airlock.yaml", base / "airlock.d"):
        if candidate.exists():
            return candidate
    raise ConfigError(
        f"no airlock configuration found: looked for ${CONFIG_ENV}, {base / 'airlock.yaml'} and "
        f"{base / 'airlock.d'}/; pass a path or create airlock.yaml (see examples/airlock.yaml)"
    )


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise ConfigError(f"configuration {path} ({what}) does not exist")
    return path


def config_files(path: Path) -> list[Path]:
    """``path`` itself, or the ``*.yaml``/``*.yml`` files directly in the directory, sorted by name.

    Raises:
        ConfigError: a directory without any YAML file.
    """
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
    if not files:
        raise ConfigError(f"configuration directory {path} holds no *.yaml or *.yml files")
    return files


def load_config(path: Path | None = None, *, cwd: Path | None = None) -> AirlockConfig:
    """Find (see :func:`find_config`), parse, validate and compile the configuration.

    Raises:
        ConfigError: nothing found, or unreadable.
        InvalidConfigError: every problem in the files, each as ``file:line:col: key: message``.
    """
    files = config_files(find_config(path, cwd=cwd))
    return compile_documents([load_yaml(f) for f in files])
