"""Wheels for the runner image, fetched on the host (sandboxes never reach a package index).

The runner needs airlock's base dependencies plus the ``providers`` extra — never the
controller extra (docker, typer, rich). They are ``pip download``-ed for the *image's*
Python version and platform (not the host's), and airlock itself is built from the source
tree with ``pip wheel --no-deps``.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from airlock.errors import ImageError

from ._proc import run_command

#: Extras of airlock installed in the runner image.
RUNNER_EXTRAS = ("providers", "mcp")
_SOURCE_DIRS = ("layer0", "airlock")
_SOURCE_SKIP = {"__pycache__", ".mypy_cache", ".ruff_cache"}
_PIP_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class WheelTarget:
    """The interpreter and platform wheels must fit."""

    python: str  # "3.11"
    glibc: tuple[int, int]  # (2, 36)
    dpkg_arch: str  # "amd64"

    @property
    def machine(self) -> str:
        """The platform tags' machine (``x86_64``, ``aarch64``).

        Raises:
            ImageError: an architecture airlock builds no image for.
        """
        try:
            return _PIP_MACHINE[self.dpkg_arch]
        except KeyError as e:
            raise ImageError(f"unsupported architecture {self.dpkg_arch!r} (amd64 and arm64 are)") from e

    def platforms(self, *, local_builds: bool = False) -> list[str]:
        """The platform tags a wheel for this target may carry, most specific first
        (``local_builds``: also ``linux_<machine>``, what a wheel built on a Linux host carries)."""
        machine, (major, minor) = self.machine, self.glibc
        tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
        tags.append(f"manylinux2014_{machine}")
        return [*tags, f"linux_{machine}"] if local_builds else tags

    def pip_args(self, *, local_builds: bool = False) -> list[str]:
        """``pip download`` options selecting binary wheels for this target (``local_builds``:
        as :meth:`platforms`)."""
        nodot = self.python.replace(".", "")
        args = [
            "--only-binary=:all:",
            "--python-version",
            self.python,
            "--implementation",
            "cp",
            "--abi",
            f"cp{nodot}",
            "--abi",
            "abi3",
            "--abi",
            "none",
        ]
        for tag in self.platforms(local_builds=local_builds):
            args += ["--platform", tag]
        return args


def find_source_tree(explicit: Path | None = None) -> Path:
    """The airlock source tree (the directory holding ``pyproject.toml``).

    Raises:
        ImageError: none is found (airlock was installed from a wheel, not a checkout).
    """
    import airlock

    candidates = [explicit] if explicit else [Path(airlock.__file__).resolve().parent.parent]
    for cand in candidates:
        if cand is not None and (cand / "pyproject.toml").is_file() and (cand / "airlock").is_dir():
            return cand
    raise ImageError(
        "building the runner image needs the airlock source tree (a directory with pyproject.toml "
        "and airlock/); run from a checkout or pass --source DIR"
    )


def runner_requirements(source: Path, extras: tuple[str, ...] = RUNNER_EXTRAS) -> list[str]:
    """An image's requirements: base dependencies plus ``extras`` (default: the runner's), from
    pyproject.

    Raises:
        ImageError: pyproject.toml cannot be read.
    """
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
        reqs = list(project.get("dependencies", []))
        for extra in extras:
            reqs += project.get("optional-dependencies", {})[extra]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
        raise ImageError(
            f"cannot read the runner's requirements from {source / 'pyproject.toml'}: {e}"
        ) from e
    return sorted(set(reqs))


def source_digest(source: Path) -> str:
    """A hash of everything that goes into the airlock wheel (sources and pyproject)."""
    h = hashlib.sha256()
    files = [source / "pyproject.toml"]
    for d in _SOURCE_DIRS:
        for path in sorted((source / d).rglob("*")):
            if path.is_file() and not _SOURCE_SKIP.intersection(path.parts) and path.suffix != ".pyc":
                files.append(path)
    for path in files:
        h.update(str(path.relative_to(source)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


#: The S3 blob store's client, installed without its dependencies: botocore pins
#: python-dateutil<3, kubernetes>=37 needs >=3, and boto3 works with the one kubernetes brings
#: (pyproject's ``s3`` extra; scripts/setup.sh does the same for the development venv).
S3_WITHOUT_DEPS = ("boto3>=1.34", "botocore", "s3transfer", "jmespath")


async def download_wheels(
    requirements: list[str], target: WheelTarget, dest: Path, *, no_deps: bool = False
) -> None:
    """``pip download`` binary wheels of ``requirements`` (``no_deps``: those alone) for
    ``target`` into ``dest``.

    Files already in ``dest`` are reused. Raises ImageError when a dependency has no wheel
    for the target (its sdist would need a compiler in the image).
    """
    await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check"]
    pip += ["--no-deps"] if no_deps else []
    await run_command(
        [*pip, "-d", str(dest), *target.pip_args(), *requirements],
        what="pip download (the image's dependencies)",
    )


async def build_airlock_wheel(source: Path, dest: Path) -> Path:
    """Build the airlock wheel from a clean copy of ``source`` into ``dest``.

    The copy holds only what the wheel is made of (``pyproject.toml``, ``layer0/``,
    ``airlock/``, ``protos/``, ``README.md``), so the build never writes into the checkout
    and stray files (caches, local state) never reach the image.

    Raises:
        ImageError: the build fails.
    """
    tree = dest.parent / "airlock-src"
    await asyncio.to_thread(_copy_source, source, tree)
    await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps"]
    await run_command([*pip, "-w", str(dest), str(tree)], what="pip wheel airlock")
    wheels = await asyncio.to_thread(lambda: sorted(dest.glob("airlock-*.whl")))
    if len(wheels) != 1:
        raise ImageError(f"pip wheel produced {len(wheels)} airlock wheels in {dest}")
    return wheels[0]


def _copy_source(source: Path, tree: Path) -> None:
    ignore = shutil.ignore_patterns(*_SOURCE_SKIP, "*.pyc")
    tree.mkdir(parents=True)
    shutil.copy2(source / "pyproject.toml", tree / "pyproject.toml")
    for d in (*_SOURCE_DIRS, "protos"):
        if (source / d).is_dir():
            shutil.copytree(source / d, tree / d, ignore=ignore)
    readme = source / "README.md"
    if readme.is_file():
        shutil.copy2(readme, tree / "README.md")
    else:  # pyproject names a readme; a checkout without one must still build
        (tree / "README.md").write_text("airlock\n")
