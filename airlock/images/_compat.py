"""The gVisor compatibility library every image carries (``statx_compat.c``).

gVisor release 20221219 refuses ``AT_NO_AUTOMOUNT`` in ``statx``/``fstatat`` with EINVAL,
and coreutils' ``ls`` and ``stat`` always pass it: without this library an agent's ``ls``
fails on every path inside a gVisor sandbox. It is compiled on the host (``cc``, the image
has no compiler) and preloaded into every process through ``/etc/ld.so.preload``; under
runc it changes nothing (a sandbox has no automount points).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from airlock.errors import ImageError

from ._proc import run_command
from ._rootfs import in_chroot

__all__ = ["LIBRARY", "add_statx_compat"]

SOURCE = Path(__file__).with_name("statx_compat.c")
#: Where the library lives inside the image.
LIBRARY = "/usr/lib/airlock/libstatx_compat.so"


async def add_statx_compat(root: Path) -> None:
    """Compile the library into ``root`` and preload it; then check ``ls`` still runs there.

    Raises:
        ImageError: no C compiler on the host, or the library breaks ``ls`` in the chroot.
    """
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ImageError(
            "building an airlock image needs a C compiler on the host for its gVisor compatibility "
            "library (install one: apt-get install gcc)"
        )
    target = root / LIBRARY.lstrip("/")
    await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
    await run_command(
        [cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", target, SOURCE],
        what="compiling the gVisor compatibility library",
    )
    await asyncio.to_thread((root / "etc" / "ld.so.preload").write_text, LIBRARY + "\n")
    await in_chroot(root, "/bin/ls", "/", what="checking ls runs with the compatibility library preloaded")
