"""What an image holds, asked of the image itself: its Python, glibc, machine and packages.

A custom image is built on a runner image; the wheels for it are downloaded on the host for
*that* image's interpreter and platform, constrained to the packages it already holds (so
installing them never replaces one the runner needs).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airlock.errors import ImageError, shorten

from ._throwaway import run_throwaway
from ._wheels import WheelTarget

__all__ = ["ImageFacts", "image_facts"]

_DPKG_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
_SCRIPT = """
import importlib.metadata as m, json, platform, sys
names = {(d.metadata["Name"] or "") + "==" + d.version for d in m.distributions() if d.metadata["Name"]}
print(json.dumps({
    "python": "%d.%d" % sys.version_info[:2],
    "implementation": sys.implementation.name,
    "libc": list(platform.libc_ver()),
    "machine": platform.machine(),
    "packages": sorted(names),
}))
"""


class ImageFacts(BaseModel):
    """An image's interpreter, platform and installed distributions (``name==version``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    python: str = Field(pattern=r"^3\.\d{1,2}$")
    implementation: str
    libc: tuple[str, str]
    machine: str = Field(max_length=32)
    packages: list[str] = Field(max_length=2000)

    def target(self) -> WheelTarget:
        """The wheel target of this image.

        Raises:
            ImageError: not CPython on glibc, or a machine airlock builds no image for.
        """
        name, version = self.libc
        parts = version.split(".")
        if (
            self.implementation != "cpython"
            or name != "glibc"
            or len(parts) < 2
            or not all(p.isdigit() for p in parts[:2])
        ):
            raise ImageError(
                f"the image runs {self.implementation} on {name or 'an unknown libc'} {version}; custom "
                "images are built on a CPython/glibc runner image"
            )
        if self.machine not in _DPKG_ARCH:
            raise ImageError(f"the image's machine {self.machine!r} is not one of {', '.join(_DPKG_ARCH)}")
        return WheelTarget(self.python, (int(parts[0]), int(parts[1])), _DPKG_ARCH[self.machine])


async def image_facts(client: Any, image: str, python: str) -> ImageFacts:
    """Ask ``image`` (with its interpreter ``python``) what it holds, in a throwaway container.

    Raises:
        ImageError: the image does not exist, its command fails, or its answer does not parse.
    """
    result = await run_throwaway(
        client, image, [python, "-I", "-c", _SCRIPT], what="reading the image's Python"
    )
    if result.exit_code != 0:
        raise ImageError(
            f"cannot read the Python of image {image} (exit {result.exit_code}): "
            f"{shorten(result.stderr, 800)}"
        )
    try:
        return ImageFacts.model_validate(json.loads(result.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, ValidationError) as e:
        raise ImageError(f"image {image} answered with something else than its Python's facts: {e}") from e
