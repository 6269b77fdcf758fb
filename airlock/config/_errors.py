"""Configuration errors that carry their source position.

::

    airlock.errors.ConfigError
    └── InvalidConfigError   one or more problems, each with file:line:col and key
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airlock.errors import ConfigError


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a configuration file, at a 1-based line and column."""

    #: The file the problem is in.
    file: Path
    #: 1-based line (0 when the problem is about the file as a whole).
    line: int
    #: 1-based column (0 when the problem is about the file as a whole).
    column: int
    #: Dotted key path (``agents.coder.network.allow[0].port``); empty for the whole file.
    key: str
    #: What is wrong, never quoting a secret value.
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else str(self.file)
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class InvalidConfigError(ConfigError):
    """Raised when configuration files are invalid; ``issues`` lists every problem found."""

    def __init__(self, issues: Sequence[ConfigIssue]) -> None:
        ordered = sorted(issues, key=lambda i: (str(i.file), i.line, i.column, i.key))
        self.issues: tuple[ConfigIssue, ...] = tuple(ordered)
        super().__init__("\n".join(str(issue) for issue in self.issues))
