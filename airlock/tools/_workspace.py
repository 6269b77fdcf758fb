"""The workspace root every file tool and ``bash`` is confined to."""

from __future__ import annotations

from pathlib import Path

from airlock.errors import SpecError, ToolError

from ._base import shown

#: Longest path accepted (Linux's ``PATH_MAX``).
PATH_MAX = 4096


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
            ToolError: ``invalid_input`` for an empty path, one containing NUL or one longer
                than :data:`PATH_MAX`;
                ``permission_denied`` when it resolves outside the workspace.
        """
        if not path or "\x00" in path:
            raise ToolError.invalid_input("path must be a non-empty string without NUL bytes")
        # Resolving takes time quadratic in the length ("../" * 1_000_000: minutes), and the
        # kernel refuses a longer path anyway.
        if len(path) > PATH_MAX:
            raise ToolError.invalid_input(f"path is {len(path)} characters long; at most {PATH_MAX} allowed")
        given = Path(path)
        candidate = given if given.is_absolute() else self.root / given
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as e:  # symlink loops
            # The reason only: the exception's own text repeats the (maybe huge) path.
            reason = e.strerror if isinstance(e, OSError) and e.strerror else "symlink loop"
            raise ToolError.permission_denied(f"cannot resolve {shown(path)}: {reason}") from e
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError.permission_denied(
                f"path {shown(path)} resolves outside the workspace {self.root}; "
                "only paths inside it are allowed"
            )
        return resolved

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, for output (``.`` for the root).

        A name that is not UTF-8 (bytes a command wrote) is shown with U+FFFD in place of the
        bad bytes: its raw form (lone surrogates) has no UTF-8 form for the wire.
        """
        rel = path.relative_to(self.root).as_posix() or "."
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
