"""The workspace root every file tool and ``bash`` is confined to."""

from __future__ import annotations

from pathlib import Path

from airlock.errors import SpecError, ToolError


class Workspace:
    """A directory the tools may touch; paths resolving outside it are refused.

    A path is resolved the way the kernel would follow it (``..`` and every symlink,
    including in the final component), then must lie under the resolved root. Absolute
    paths are accepted only when they resolve inside the root.

    The check happens just before the file is opened; a process racing to swap a checked
    directory for a symlink between the two is outside this model (the sandbox holds only
    the agent's own processes).
    """

    def __init__(self, root: Path) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise SpecError(f"workspace {root} is not a directory")
        self.root = resolved

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root, or absolute inside it).

        Raises:
            ToolError: ``invalid_input`` for an empty path or one containing NUL;
                ``permission_denied`` when it resolves outside the workspace.
        """
        if not path or "\x00" in path:
            raise ToolError.invalid_input("path must be a non-empty string without NUL bytes")
        given = Path(path)
        candidate = given if given.is_absolute() else self.root / given
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as e:  # symlink loops
            raise ToolError.permission_denied(f"cannot resolve {path!r}: {e}") from e
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError.permission_denied(
                f"path {path!r} resolves outside the workspace {self.root}; only paths inside it are allowed"
            )
        return resolved

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, for output (``.`` for the root)."""
        return path.relative_to(self.root).as_posix() or "."
