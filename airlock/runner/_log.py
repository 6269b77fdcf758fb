"""Structured logs: one JSON object per line on stdout, with secrets redacted."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

#: Attributes every LogRecord has; anything else passed via ``extra=`` becomes a JSON field.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

LOGGER_NAME = "airlock.runner"


def logger() -> logging.Logger:
    """The runner's logger."""
    return logging.getLogger(LOGGER_NAME)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: ts, level, logger, msg, plus the record's extras.

    Every occurrence of a registered secret (the bearer token) is replaced by ``[redacted]``
    in the whole line, whatever field it ended up in.
    """

    def __init__(self, secrets: list[str] | None = None) -> None:
        super().__init__()
        self._secrets = [s for s in (secrets or []) if s]

    def add_secret(self, secret: str) -> None:
        """Redact ``secret`` from every later line."""
        if secret:
            self._secrets.append(secret)

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, Any] = {
            "ts": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        line = json.dumps(entry, default=str, ensure_ascii=False)
        for secret in self._secrets:
            line = line.replace(secret, "[redacted]")
        return line


def configure(level: int = logging.INFO, secrets: list[str] | None = None) -> JsonFormatter:
    """Send the runner's (and grpc's) logs to stdout as JSON lines; returns the formatter."""
    formatter = JsonFormatter(secrets)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return formatter
