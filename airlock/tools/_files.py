"""File tools confined to the workspace: ``read_file``, ``write_file``, ``list_files``, ``edit_file``.

The filesystem work runs in a worker thread (``asyncio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from airlock.errors import ToolError
from airlock.turn import ToolContext

from ._base import InputT, OptionsT, SandboxTool, ToolInput, ToolOptions, shown
from ._workspace import Workspace

_MIB = 1024 * 1024


def _os_error(path: str, e: OSError) -> ToolError:
    path = shown(path)  # quoted and cut: a path of megabytes must not come back whole
    if isinstance(e, FileNotFoundError):
        return ToolError.execution_failed(f"{path}: no such file or directory")
    if isinstance(e, IsADirectoryError):
        return ToolError.execution_failed(f"{path}: is a directory")
    if isinstance(e, NotADirectoryError):
        return ToolError.execution_failed(f"{path}: not a directory")
    if isinstance(e, PermissionError):
        return ToolError.permission_denied(f"{path}: permission denied")
    return ToolError.execution_failed(f"{path}: {e.strerror or e}")


def _refuse_special(target: Path, path: str) -> None:
    """Refuse a FIFO, socket or device file (a command may create one in the workspace):
    opening it could block the worker thread forever. Missing files and directories pass (the
    open reports them).

    Raises:
        OSError: the file cannot be inspected.
    """
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ToolError.execution_failed(f"{shown(path)} is not a regular file")


class _FileTool(SandboxTool[InputT, OptionsT]):
    def __init__(self, options: OptionsT, workspace: Workspace) -> None:
        super().__init__(options)
        self.workspace = workspace


# --- read_file ---------------------------------------------------------------------------------


class ReadFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace.")


class ReadFileOptions(ToolOptions):
    #: Bytes returned at most; a longer file is cut with a ``[truncated N bytes]`` marker.
    max_bytes: int = Field(default=_MIB, gt=0)


class ReadFileTool(_FileTool[ReadFileInput, ReadFileOptions]):
    """Reads a text file of the workspace (UTF-8; invalid bytes replaced), capped in size."""

    name = "read_file"
    description = "Read a text file in the workspace. Long files are cut and marked [truncated N bytes]."
    input_model: ClassVar[type[ToolInput]] = ReadFileInput
    options_model: ClassVar[type[ToolOptions]] = ReadFileOptions

    async def run(self, input: ReadFileInput, ctx: ToolContext) -> JsonValue:
        """Return the file's text."""
        limit = self.options.max_bytes
        path = input.path

        def read() -> str:
            target = self.workspace.resolve(path)
            try:
                _refuse_special(target, path)
                with open(target, "rb") as f:
                    data = f.read(limit + 1)
                    size = os.fstat(f.fileno()).st_size
            except OSError as e:
                raise _os_error(path, e) from e
            if len(data) <= limit:
                return data.decode("utf-8", errors="replace")
            return _cut(data, limit, size)

        return await asyncio.to_thread(read)


def _cut(data: bytes, limit: int, size: int) -> str:
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[truncated {max(size, len(data)) - limit} bytes]"


# --- write_file --------------------------------------------------------------------------------


class WriteFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace. Parent directories are created.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileOptions(ToolOptions):
    #: Largest content accepted, bytes (UTF-8).
    max_bytes: int = Field(default=_MIB, gt=0)


class WriteFileTool(_FileTool[WriteFileInput, WriteFileOptions]):
    """Creates or overwrites a text file in the workspace (parents created)."""

    name = "write_file"
    description = "Create or overwrite a text file in the workspace with the given content."
    input_model: ClassVar[type[ToolInput]] = WriteFileInput
    options_model: ClassVar[type[ToolOptions]] = WriteFileOptions

    async def run(self, input: WriteFileInput, ctx: ToolContext) -> JsonValue:
        """Write the file; returns what was written."""
        data = input.content.encode("utf-8")
        if len(data) > self.options.max_bytes:
            raise ToolError.invalid_input(
                f"content is {len(data)} bytes; write_file accepts at most {self.options.max_bytes}"
            )
        path = input.path

        def write() -> str:
            target = self.workspace.resolve(path)
            try:
                _refuse_special(target, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as e:
                raise _os_error(path, e) from e
            return f"wrote {len(data)} bytes to {self.workspace.relative(target)}"

        return await asyncio.to_thread(write)


# --- list_files --------------------------------------------------------------------------------


class ListFilesInput(ToolInput):
    path: str = Field(default=".", description="Directory, relative to the workspace.")
    recursive: bool = Field(default=False, description="List subdirectories too.")


class ListFilesOptions(ToolOptions):
    #: Entries returned at most.
    max_entries: int = Field(default=1000, gt=0)


EntryType = Literal["file", "dir", "symlink", "other"]


def _entry_type(mode: int) -> EntryType:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


class ListFilesTool(_FileTool[ListFilesInput, ListFilesOptions]):
    """Lists a workspace directory (optionally recursive; symlinks listed, never followed)."""

    name = "list_files"
    description = "List files in a workspace directory (paths relative to the workspace, with type and size)."
    input_model: ClassVar[type[ToolInput]] = ListFilesInput
    options_model: ClassVar[type[ToolOptions]] = ListFilesOptions

    async def run(self, input: ListFilesInput, ctx: ToolContext) -> JsonValue:
        """Return ``{"entries": [{"path", "type", "size"}], "truncated": bool}``."""
        limit = self.options.max_entries
        path, recursive = input.path, input.recursive

        def listing() -> JsonValue:
            root = self.workspace.resolve(path)
            entries: list[JsonValue] = []
            truncated = False
            pending = [root]
            try:
                while pending and not truncated:
                    directory = pending.pop(0)
                    with os.scandir(directory) as it:
                        children = sorted(it, key=lambda e: e.name)
                    for child in children:
                        if len(entries) >= limit:
                            truncated = True
                            break
                        st = child.stat(follow_symlinks=False)
                        kind = _entry_type(st.st_mode)
                        rel = self.workspace.relative(Path(child.path))
                        entries.append({"path": rel, "type": kind, "size": st.st_size})
                        if recursive and kind == "dir":
                            pending.append(Path(child.path))
            except OSError as e:
                raise _os_error(path, e) from e
            return {"entries": entries, "truncated": truncated}

        return await asyncio.to_thread(listing)


# --- edit_file ---------------------------------------------------------------------------------


class EditFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace.")
    old_string: str = Field(min_length=1, description="Exact text to replace (must occur exactly once).")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


class EditFileOptions(ToolOptions):
    #: Largest file edited, bytes.
    max_bytes: int = Field(default=_MIB, gt=0)


class EditFileTool(_FileTool[EditFileInput, EditFileOptions]):
    """Exact-string replacement in a workspace text file.

    Fails when ``old_string`` does not occur, or occurs more than once without
    ``replace_all`` (the model must give enough context to make the edit unambiguous).
    """

    name = "edit_file"
    description = (
        "Replace an exact string in a workspace file. old_string must occur exactly once "
        "unless replace_all is true."
    )
    input_model: ClassVar[type[ToolInput]] = EditFileInput
    options_model: ClassVar[type[ToolOptions]] = EditFileOptions

    async def run(self, input: EditFileInput, ctx: ToolContext) -> JsonValue:
        """Edit the file; returns how many replacements were made."""
        edit, limit = input, self.options.max_bytes

        def apply() -> str:
            target = self.workspace.resolve(edit.path)
            try:
                _refuse_special(target, edit.path)
                size = target.stat().st_size
                if size > limit:
                    raise ToolError.invalid_input(
                        f"{shown(edit.path)} is {size} bytes; edit_file edits at most {limit}"
                    )
                raw = target.read_bytes()
            except OSError as e:
                raise _os_error(edit.path, e) from e
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ToolError.execution_failed(f"{shown(edit.path)} is not UTF-8 text") from e
            count = text.count(edit.old_string)
            if count == 0:
                raise ToolError.execution_failed(f"old_string not found in {shown(edit.path)}")
            if count > 1 and not edit.replace_all:
                raise ToolError.execution_failed(
                    f"old_string occurs {count} times in {shown(edit.path)}; add surrounding context to "
                    "make it unique, or set replace_all"
                )
            # The size first, from the count: replace_all of a 1-byte string occurring a million
            # times by a megabyte would build a terabyte before any check on the result.
            grown = len(edit.new_string.encode("utf-8")) - len(edit.old_string.encode("utf-8"))
            if len(raw) + count * grown > limit:
                raise ToolError.invalid_input(
                    f"the edited file would be {len(raw) + count * grown} bytes (limit {limit})"
                )
            encoded = text.replace(edit.old_string, edit.new_string).encode("utf-8")
            try:
                target.write_bytes(encoded)
            except OSError as e:
                raise _os_error(edit.path, e) from e
            return (
                f"replaced {count} occurrence{'s' if count != 1 else ''} in {self.workspace.relative(target)}"
            )

        return await asyncio.to_thread(apply)
