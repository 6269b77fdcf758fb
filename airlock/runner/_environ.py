"""Late-bound environment variables: an Execute request's ``environment``.

A sandbox started ahead of its job (a warm pool member) holds no secret; its job's env_var
credentials arrive with the first Execute and are set here, process-wide, before the turn is
built, so the provider and every tool process see them. Their values are secrets: every log
line of the runner redacts them from then on.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

from airlock import wire

from ._log import JsonFormatter

__all__ = ["apply_environment", "environment_problems"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Names the runner itself reads; a request never sets them.
_RESERVED_PREFIX = "AIRLOCK_"


def environment_problems(environment: Mapping[str, str]) -> list[wire.Problem]:
    """What is wrong with the requested variables' names and values (empty: nothing)."""
    problems = []
    for name, value in environment.items():
        where = f"environment[{name[:64]!r}]"
        if not _NAME.fullmatch(name):
            problems.append(wire.Problem(where, "not a variable name ([A-Za-z_][A-Za-z0-9_]*)"))
        elif name.upper().startswith(_RESERVED_PREFIX):
            problems.append(wire.Problem(where, f"{_RESERVED_PREFIX}* names are the runner's own"))
        if "\0" in value:
            problems.append(wire.Problem(where, "a value cannot hold NUL"))
    return problems


def apply_environment(environment: Mapping[str, str]) -> None:
    """Set the variables for this process and its children; redact their values from logs."""
    formatters = [h.formatter for h in logging.getLogger().handlers if isinstance(h.formatter, JsonFormatter)]
    for name, value in environment.items():
        for formatter in formatters:
            formatter.add_secret(value)
        os.environ[name] = value
