"""What the model is told of a job's input files (an agent's ``input_files:`` section).

The files are placed in the workspace either way. Announcing them is what a chat does with
attachments: the job's message gains a text block that names each file (path and size) and,
with ``show: content``, shows the text of those that fit in ``max_bytes``, whole or, with
``lines``, only their first lines (a CSV's header). A small model then works from what it can
see instead of guessing a file's layout (which CSV column), and a resumed job reads the same
message, since the announcement is stored with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["InputFilesPolicy"]

#: The line the announcement starts with.
HEADING = "Files given with this message, in the working directory:"


class InputFilesPolicy(BaseModel):
    """How a job's input files are announced in its message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``none``: not at all; ``names``: each file's path and size; ``content``: also the text
    #: of the files that fit in ``max_bytes`` (in path order), the others by name.
    show: Literal["none", "names", "content"] = "none"
    #: Bytes of file text shown in all (``show: content``). A file that is not UTF-8 text, or
    #: that no longer fits, is named with its size and marked as not shown.
    max_bytes: int = Field(default=16 * 1024, ge=1, le=1024 * 1024)
    #: With ``show: content``, only each file's first ``lines`` lines are shown, marked as a
    #: part (``lines="1 of 6"``); unset: whole files.
    lines: int | None = Field(default=None, ge=1, le=10_000)

    def announcement(self, files: Sequence[tuple[str, bytes]]) -> str | None:
        """The text announcing ``files`` (workspace path, content; in the order given), or
        None when nothing is announced (``show: none``, or no files)."""
        if self.show == "none" or not files:
            return None
        budget = self.max_bytes
        parts = [HEADING]
        for path, data in files:
            text = _text(data)
            if text is not None and self.show == "content":
                text, part = self._shown(text)
                size = len(text.encode())
                if size <= budget:
                    budget -= size
                    end = "" if text.endswith("\n") or not text else "\n"
                    parts.append(f"<file path={json.dumps(path)}{part}>\n{text}{end}</file>")
                    continue
            why = "" if self.show == "names" else ", binary, not shown" if text is None else ", not shown"
            parts.append(f"- {path} ({_size(len(data))}{why})")
        return "\n".join(parts)

    def _shown(self, text: str) -> tuple[str, str]:
        """The part of ``text`` shown, and the attribute marking a part (empty when whole)."""
        all_lines = text.splitlines(keepends=True)
        if self.lines is None or len(all_lines) <= self.lines:
            return text, ""
        return "".join(all_lines[: self.lines]), f' lines="{self.lines} of {len(all_lines)}"'


def _text(data: bytes) -> str | None:
    """``data`` as text: UTF-8 without NUL bytes; None for anything else."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} byte{'' if n == 1 else 's'}"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"
