"""Does a wheel file fit an image? Its file name's tags (PEP 427/425) against a :class:`WheelTarget`.

Checked on the host before anything is built, so a wheel for another Python, another machine
or a newer glibc is refused with both sides named, not by a pip error inside the image build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from airlock.errors import ImageError

from ._wheels import WheelTarget

__all__ = ["WheelName", "check_wheel_fits", "parse_wheel_name"]

_WHEEL = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?"
    r"-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$"
)


@dataclass(frozen=True)
class WheelName:
    """What a wheel's file name says: distribution, version and compressed tag sets."""

    name: str
    version: str
    python: tuple[str, ...]
    abi: tuple[str, ...]
    platform: tuple[str, ...]

    def tags(self) -> str:
        """``python-abi-platform`` as written in the file name."""
        return f"{'.'.join(self.python)}-{'.'.join(self.abi)}-{'.'.join(self.platform)}"


def parse_wheel_name(filename: str) -> WheelName:
    """The parts of a wheel's file name.

    Raises:
        ImageError: ``filename`` is not a wheel's name (``name-version-python-abi-platform.whl``).
    """
    m = _WHEEL.match(filename)
    if m is None:
        raise ImageError(
            f"{filename!r} is not a wheel file name (name-version[-build]-python-abi-platform.whl)"
        )
    return WheelName(
        m["name"],
        m["version"],
        tuple(m["python"].split(".")),
        tuple(m["abi"].split(".")),
        tuple(m["platform"].split(".")),
    )


def _fits(python: str, abi: str, platform: str, target: WheelTarget) -> bool:
    major, minor = (int(p) for p in target.python.split(".")[:2])
    if platform != "any" and platform not in target.platforms(local_builds=True):
        return False
    exact = f"cp{major}{minor}"
    older = {f"cp{major}{m}" for m in range(2, minor + 1)}
    if abi == "none":
        return python in {f"py{major}", exact, *(f"py{major}{m}" for m in range(0, minor + 1))}
    if abi == "abi3":
        return python in older
    return abi == exact and python == exact


def check_wheel_fits(path: Path, target: WheelTarget) -> WheelName:
    """``path``'s parsed name, when some tag it carries fits ``target``.

    Raises:
        ImageError: not a wheel file, or built for another Python, machine or glibc (the
            message names the wheel's tags and the image's).
    """
    if not path.is_file():
        raise ImageError(f"wheel {path} does not exist (or is not a file)")
    wheel = parse_wheel_name(path.name)
    if any(
        _fits(py, abi, plat, target) for py, abi, plat in product(wheel.python, wheel.abi, wheel.platform)
    ):
        return wheel
    raise ImageError(
        f"wheel {path.name} is built for {wheel.tags()}, which the image cannot install: its Python is "
        f"CPython {target.python} on {target.machine} with glibc {target.glibc[0]}.{target.glibc[1]} "
        f"(a pure-Python wheel, py3-none-any, fits any image)"
    )
