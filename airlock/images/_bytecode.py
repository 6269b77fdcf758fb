"""Bytecode compiled into the image, so that no sandbox ever compiles a module.

A sandbox's root filesystem is read-only and ``PYTHONDONTWRITEBYTECODE`` is set: a module
without a valid ``.pyc`` in the image would be compiled again, in memory, at every start.
The builder compiles the standard library and the venv with the image's own interpreter as
*unchecked-hash* pycs (PEP 552): their header holds a hash of the source instead of its
mtime and size, so they stay valid whatever happens to the files' timestamps on the way
(``tar``, ``docker import``, a normalised layer), and the import system never re-reads the
source to check them (the image is immutable). :func:`check_argv` proves it at build
time: it imports a module the way the sandbox does and refuses any module that came from
source. This module only builds the commands; the builder runs them in the rootfs (chroot).
"""

from __future__ import annotations

#: PEP 552 flags of an unchecked-hash pyc: hash-based (bit 0), source not checked (bit 1 clear).
UNCHECKED_HASH_FLAGS = 0b01

#: Run by the image's python with ``-B`` (writes nothing) and the arguments MODULE FLAGS:
#: imports MODULE and exits non-zero naming every module it loaded from a ``.py`` file whose
#: pyc is missing, of another Python, or has other PEP 552 flags than FLAGS.
CHECK_SCRIPT = """
import importlib, importlib.util, sys
importlib.import_module(sys.argv[1])
bad = []
for name, module in sorted(sys.modules.items()):
    origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
    if not origin.endswith(".py"):
        continue
    try:
        with open(importlib.util.cache_from_source(origin), "rb") as f:
            head = f.read(8)
    except OSError:
        head = b""
    if head[:4] != importlib.util.MAGIC_NUMBER or int.from_bytes(head[4:8], "little") != int(sys.argv[2]):
        bad.append(name)
sys.exit("modules without an unchecked-hash pyc: " + ", ".join(bad) if bad else 0)
"""


def compile_argv(*paths: str, python: str = "python3") -> list[str]:
    """The command compiling every module under ``paths`` as unchecked-hash pycs with the
    image's ``python``, replacing any pyc already there (pip's, ensurepip's)."""
    return [python, "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash", *paths]


def check_argv(module: str, python: str) -> list[str]:
    """The command importing ``module`` with the image's ``python``, writing nothing, and
    failing (naming them) when a module it loads has no unchecked-hash pyc."""
    return [python, "-B", "-c", CHECK_SCRIPT, module, str(UNCHECKED_HASH_FLAGS)]
