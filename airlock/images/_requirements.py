"""A requirements file for a custom sandbox image: one requirement per line, checked on the host.

Only requirements by name (``wordcount>=1.0``, ``httpx[http2]==0.27.*; python_version >= "3.10"``)
are accepted: their wheels are downloaded on the host and installed with no index in the image.
pip options (``-r``, ``-e``, ``--index-url``…) and direct references (``name @ URL``, paths)
are refused with the file and line, and how to say it instead (``--wheel``, ``--find-links``).
"""

from __future__ import annotations

import re
from pathlib import Path

from airlock.errors import ImageError, shorten

__all__ = ["parse_requirements", "read_requirements"]

_REQUIREMENT = re.compile(
    r"""^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)   # the distribution
        \s*(?:\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?  # [extras]
        \s*(?:\(?\s*(?:===|~=|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+   # a version specifier…
          (?:\s*,\s*(?:===|~=|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+)*\s*\)?)?  # …and more
        \s*(?:;\s*[^;]+)?$                                      # ; environment marker
    """,
    re.VERBOSE,
)
_COMMENT = re.compile(r"(^|\s)#.*$")


def parse_requirements(text: str, origin: str) -> list[str]:
    """The requirements of a requirements file's ``text`` (comments and blank lines dropped,
    continuation lines joined), in order and without duplicates.

    Raises:
        ImageError: a line is a pip option, a direct reference or not a requirement (each
            problem as ``origin:line: …``).
    """
    found: list[str] = []
    problems: list[str] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if not line:
            continue
        problem = _problem(line)
        if problem:
            problems.append(f"{origin}:{start}: {problem}")
        elif line not in found:
            found.append(line)
    if pending.strip():
        problems.append(f"{origin}:{start}: the file ends in a line continuation (a trailing backslash)")
    if problems:
        raise ImageError("invalid requirements:\n" + "\n".join(problems))
    return found


def _problem(line: str) -> str | None:
    shown = shorten(line, 120)
    if line.startswith("-"):
        return (
            f"{shown!r}: pip options are not supported here; list requirements only (an index: pip's "
            "own configuration or --find-links / --no-index; a local wheel: --wheel FILE)"
        )
    if re.match(r"^[^;]*\s@\s", line) or "://" in line.split(";")[0] or line.startswith((".", "/")):
        return (
            f"{shown!r}: direct references (URLs, paths) are not supported; pass a local wheel with "
            "--wheel FILE"
        )
    if not _REQUIREMENT.match(line):
        return f"{shown!r} is not a requirement (name[extras] [version specifiers] [; marker])"
    return None


def read_requirements(path: Path) -> list[str]:
    """The requirements in the file ``path`` (see :func:`parse_requirements`).

    Raises:
        ImageError: the file cannot be read, or a line is not a requirement.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ImageError(f"cannot read the requirements file {path}: {e}") from e
    return parse_requirements(text, str(path))
