"""The runner and controller images, built with no registry: ``airlock images build``.

Pipeline (all on the host; the sandbox never reaches a package index):

1. apt resolves the Debian closure of :data:`~._rootfs.BASE_PACKAGES` against an empty
   dpkg status; missing ``.deb`` files are downloaded into the cache.
2. ``pip download`` fetches binary wheels of the runner's dependencies (base + ``providers``
   extra) for the image's Python and glibc; ``pip wheel --no-deps`` builds airlock itself.
3. The ``.deb`` files are unpacked into a merged-/usr rootfs, ``python3 -m venv /opt/venv``
   runs in a chroot, the gVisor compatibility library is compiled in (:mod:`._compat`),
   and the wheels are installed there with ``pip install --no-index``. The standard library
   and the venv are byte-compiled by the image's python (:mod:`._bytecode`), and importing
   the recipe's start-up module is checked to load bytecode only.
4. The rootfs is streamed into ``docker import`` with ENV/USER/WORKDIR/ENTRYPOINT changes
   and labels (version, source digest, package closure).

Downloads are cached under ``~/.cache/airlock/images`` (``AIRLOCK_IMAGE_CACHE`` overrides),
so a rebuild only unpacks, installs and imports. Each :class:`ImageRecipe` names its image:
``airlock-runner:<airlock version>`` (what sandboxes run: the runner, the proxies, the providers'
SDKs, no controller package) and ``airlock-controller:<airlock version>`` (``airlock serve`` and
the rest of the CLI, for a cluster). Each is labelled with the digest of the source tree it was
built from; without ``force`` a build whose digest matches is skipped.

PID 1 is not part of the image: runc sandboxes run with Docker's ``init=True`` (docker-init,
shipped with the engine), so signals are forwarded and teardown does not wait out a grace
period; under gVisor the runner itself is PID 1 (see the Docker backend's ``Boundary``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock import __version__
from airlock.errors import ImageError
from layer0 import EnvError

from . import _bytecode, _rootfs, _wheels
from ._compat import add_statx_compat
from ._dockerapi import docker_client, docker_errors

RUNNER_IMAGE_REPOSITORY = "airlock-runner"
CONTROLLER_IMAGE_REPOSITORY = "airlock-controller"
#: Bumped when the recipe changes in a way the inputs' hashes would not show.
RECIPE_VERSION = "2"
LABEL_IMAGE = "airlock.image"
LABEL_VERSION = "airlock.version"
LABEL_DIGEST = "airlock.source-digest"
LABEL_BASE = "airlock.base-packages"
#: Where the runner listens and finds its token, inside the sandbox.
CONTROL_DIR = "/run/airlock"
WORKSPACE = "/workspace"
VENV = "/opt/venv"
SANDBOX_UID = 65534
_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def runner_image_tag(version: str = __version__) -> str:
    """``airlock-runner:<version>``, the tag DockerEnvironment runs by default."""
    return f"{RUNNER_IMAGE_REPOSITORY}:{version}"


def controller_image_tag(version: str = __version__) -> str:
    """``airlock-controller:<version>``, the image the Helm chart deploys."""
    return f"{CONTROLLER_IMAGE_REPOSITORY}:{version}"


@dataclass(frozen=True)
class ImageRecipe:
    """What one image is: its name, the extras installed, how it starts, what it must not hold."""

    #: ``runner`` or ``controller`` (the :data:`LABEL_IMAGE` value).
    name: str
    repository: str
    extras: tuple[str, ...]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    workdir: str = WORKSPACE
    #: Modules the image must not contain (checked after installing).
    forbidden_modules: tuple[str, ...] = ()
    #: Imported at build time to check that it loads bytecode only (no compiling at start).
    startup_module: str | None = None
    #: Installed after the rest without their dependencies (their pins conflict with another
    #: dependency's; see :data:`~._wheels.S3_WITHOUT_DEPS`).
    without_deps: tuple[str, ...] = ()

    def tag(self, version: str = __version__) -> str:
        return f"{self.repository}:{version}"


#: The sandbox's image: the runner (and proxies); no controller-side package.
RUNNER = ImageRecipe(
    "runner",
    RUNNER_IMAGE_REPOSITORY,
    _wheels.RUNNER_EXTRAS,
    (f"{VENV}/bin/python", "-m", "airlock.runner"),
    forbidden_modules=("docker", "typer", "rich"),
    startup_module="airlock.runner.__main__",
)
#: The controller's image: the ``airlock`` CLI (``serve`` by default) with every extra.
CONTROLLER = ImageRecipe(
    "controller",
    CONTROLLER_IMAGE_REPOSITORY,
    (*_wheels.RUNNER_EXTRAS, "controller"),
    (f"{VENV}/bin/airlock",),
    cmd=("serve",),
    workdir="/tmp",
    startup_module="airlock.cli",
    without_deps=_wheels.S3_WITHOUT_DEPS,  # the S3 blob store (--blob-store s3://…)
)
RECIPES = {r.name: r for r in (RUNNER, CONTROLLER)}


def image_cache_dir() -> Path:
    """``$AIRLOCK_IMAGE_CACHE`` or ``~/.cache/airlock/images``."""
    env = os.environ.get("AIRLOCK_IMAGE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "airlock" / "images"


def checkout_digest() -> str | None:
    """The source digest an image built from this checkout would carry (None: not a checkout)."""
    try:
        return _image_digest(_wheels.find_source_tree(None))
    except Exception:
        return None


def _image_digest(src: Path) -> str:
    """The digest label of an image built from the source tree ``src`` by this recipe."""
    return hashlib.sha256(f"{RECIPE_VERSION}:{_wheels.source_digest(src)}".encode()).hexdigest()[:16]


class StepTimer:
    """Times a build's steps: calling it with a step's name records the seconds since the
    previous call (or since it was made); :attr:`steps` lists them in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.steps.append((name, now - self._last))
        self._last = now


@dataclass
class ImageBuildReport:
    """What a build did.

    Attributes:
        tag: the image tag.
        image_id: the image id (``sha256:…``).
        skipped: True when an image built from the same sources already existed.
        seconds: wall-clock time of the whole build.
        steps: ``(step, seconds)`` in order.
        size_bytes: the image size.
        removed_previous: id of the image the tag pointed to before, if it was removed.
    """

    tag: str
    image_id: str
    skipped: bool
    seconds: float
    steps: list[tuple[str, float]] = field(default_factory=list)
    size_bytes: int = 0
    removed_previous: str | None = None


Progress = Callable[[str], None]


async def build_image(
    recipe: ImageRecipe,
    *,
    force: bool = False,
    source: Path | None = None,
    cache_dir: Path | None = None,
    tag: str | None = None,
    on_step: Progress | None = None,
) -> ImageBuildReport:
    """Build ``recipe``'s image offline (see the module docstring); needs root and apt.

    Args:
        force: rebuild even if the image is current, and re-download cached wheels.
        source: the airlock source tree (default: the checkout this package runs from).
        cache_dir: download cache (default :func:`image_cache_dir`).
        tag: image tag (default: the recipe's, ``<repository>:<airlock version>``).
        on_step: called with a short description as each step starts.

    Raises:
        ImageError: a step failed (the message names it and carries its error output).
    """
    started = time.perf_counter()
    tag = tag or recipe.tag()
    say = on_step or (lambda _msg: None)
    src = _wheels.find_source_tree(source)
    digest = _image_digest(src)
    client = await _client()
    existing = await asyncio.to_thread(_get_image, client, tag)
    if existing is not None and not force and existing["Config"]["Labels"].get(LABEL_DIGEST) == digest:
        return ImageBuildReport(
            tag, existing["Id"], True, time.perf_counter() - started, size_bytes=existing["Size"]
        )

    cache = cache_dir or image_cache_dir()
    step = StepTimer()

    say("resolving Debian packages")
    arch = await _rootfs.dpkg_architecture()
    debs = await _rootfs.resolve_closure()
    step("resolve packages")
    target = _wheels.WheelTarget(_rootfs.python_version(debs), _rootfs.glibc_version(debs), arch)
    requirements = _wheels.runner_requirements(src, recipe.extras)
    py, (glibc_major, glibc_minor) = target.python.replace(".", ""), target.glibc
    wheel_dir = cache / "wheels" / f"cp{py}-glibc{glibc_major}.{glibc_minor}-{arch}"
    stamp = wheel_dir / f".requirements-{recipe.name}"
    want_stamp = "\n".join([*requirements, *(f"{r} (no deps)" for r in recipe.without_deps)])

    with tempfile.TemporaryDirectory(prefix="airlock-image-") as tmp:
        work = Path(tmp)
        say(f"downloading {len(debs)} packages and the {recipe.name}'s wheels (cached in {cache})")

        async def fetch_wheels() -> None:
            if force or not stamp.is_file() or stamp.read_text() != want_stamp:
                await _wheels.download_wheels(requirements, target, wheel_dir)
                if recipe.without_deps:
                    await _wheels.download_wheels(list(recipe.without_deps), target, wheel_dir, no_deps=True)
                stamp.write_text(want_stamp)

        deb_paths, _, airlock_wheel = await asyncio.gather(
            _rootfs.download_debs(debs, cache / "debs" / arch),
            fetch_wheels(),
            _wheels.build_airlock_wheel(src, work / "airlock-wheel"),
        )
        step("download .debs + wheels, build airlock wheel")

        say("unpacking the root filesystem")
        root = work / "rootfs"
        await _rootfs.unpack_rootfs(root, deb_paths)
        step("unpack rootfs")
        say("creating /opt/venv")
        await _rootfs.finish_base(root)
        await add_statx_compat(root)
        step("ca-certificates + venv + gVisor compatibility library")

        say("installing airlock into the image (offline)")
        await _install_wheels(root, [wheel_dir, airlock_wheel.parent], airlock_wheel.name, recipe)
        step("pip install (offline, in chroot)")

        say(f"importing {tag} into Docker")
        labels = {
            LABEL_IMAGE: recipe.name,
            LABEL_VERSION: __version__,
            LABEL_DIGEST: digest,
            LABEL_BASE: _rootfs.closure_key(debs),
        }
        image_id = await asyncio.to_thread(import_rootfs, client, root, tag, _changes(recipe, labels))
        step("docker import")

    removed = None
    if existing is not None and existing["Id"] != image_id:
        removed = await asyncio.to_thread(_remove_quietly_reporting, client, existing["Id"])
    info = await asyncio.to_thread(_get_image, client, tag)
    size = info["Size"] if info else 0
    return ImageBuildReport(tag, image_id, False, time.perf_counter() - started, step.steps, size, removed)


async def _client() -> Any:
    try:
        return await asyncio.to_thread(docker_client, 600)
    except EnvError as e:
        raise ImageError(str(e)) from e


def find_image(client: Any, tag: str) -> dict[str, Any] | None:
    """The local image's attributes, None when there is none; blocking (``asyncio.to_thread``).

    Raises:
        ImageError: the engine cannot be asked.
    """
    return _get_image(client, tag)


def _get_image(client: Any, tag: str) -> dict[str, Any] | None:
    errors = docker_errors()
    try:
        attrs: dict[str, Any] = client.api.inspect_image(tag)
    except errors.ImageNotFound:
        return None
    except errors.DockerException as e:
        raise ImageError(f"cannot inspect image {tag}: {e}") from e
    return attrs


def _remove_quietly_reporting(client: Any, image_id: str) -> str | None:
    """Remove the image the tag used to name; None when it is still in use (kept)."""
    errors = docker_errors()
    try:
        client.api.remove_image(image_id)
    except errors.DockerException:
        return None
    return image_id


async def _pip_install(root: Path, *args: str, what: str) -> None:
    """``pip install`` in the image from the staged wheels alone (compiled later, once, as
    unchecked-hash pycs)."""
    pip = [f"{VENV}/bin/pip", "install", "-q", "--no-index", "--no-cache-dir", "--no-compile"]
    await _rootfs.in_chroot(root, *pip, "--find-links", "/tmp/airlock-wheels", *args, what=what)


async def _install_wheels(
    root: Path, wheel_dirs: list[Path], airlock_wheel: str, recipe: ImageRecipe
) -> None:
    staging = root / "tmp" / "airlock-wheels"
    staging.mkdir(parents=True)
    for d in wheel_dirs:
        for whl in d.glob("*.whl"):
            shutil.copy2(whl, staging / whl.name)
    extras = ",".join(recipe.extras)
    try:
        await _pip_install(
            root, f"/tmp/airlock-wheels/{airlock_wheel}[{extras}]", what="pip install in the image"
        )
        if recipe.without_deps:
            await _pip_install(
                root, "--no-deps", *recipe.without_deps, what="pip install --no-deps in the image"
            )
        python = f"{VENV}/bin/python"
        await _rootfs.in_chroot(
            root, *_bytecode.compile_argv(f"{VENV}/lib", python=python), what="compiling the venv"
        )
        if recipe.forbidden_modules:  # e.g. the runner starts with no controller-side package
            await _rootfs.in_chroot(
                root,
                f"{VENV}/bin/python",
                "-c",
                "import importlib.util as u, sys; "
                f"bad = [m for m in {recipe.forbidden_modules!r} if u.find_spec(m)]; "
                f"sys.exit('the {recipe.name} image must not hold: ' + ', '.join(bad) if bad else 0)",
                what=f"checking the {recipe.name} image holds none of {', '.join(recipe.forbidden_modules)}",
            )
        if recipe.startup_module:  # what a read-only sandbox compiles, it compiles at every start
            await _rootfs.in_chroot(
                root,
                *_bytecode.check_argv(recipe.startup_module, python),
                what=f"checking that {recipe.startup_module} loads bytecode only",
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _changes(recipe: ImageRecipe, labels: dict[str, str]) -> list[str]:
    changes = [
        f"ENV PATH={_PATH}",
        "ENV LANG=C.UTF-8",
        "ENV PYTHONUNBUFFERED=1",
        "ENV PYTHONDONTWRITEBYTECODE=1",
        "ENV HOME=/tmp",
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        f"WORKDIR {recipe.workdir}",
        f"ENTRYPOINT {json.dumps(list(recipe.entrypoint))}",
    ]
    if recipe.cmd:
        changes.append(f"CMD {json.dumps(list(recipe.cmd))}")
    changes += [f'LABEL {k}="{v}"' for k, v in labels.items()]
    return changes


def import_rootfs(client: Any, root: Path, tag: str, changes: list[str]) -> str:
    """Stream the directory ``root`` into ``docker import`` as ``tag`` (numeric owners kept)
    with the Dockerfile-style ``changes`` (``ENV …``, ``USER …``, ``LABEL …``); the new image's
    id. Blocking (call via ``asyncio.to_thread``).

    Raises:
        ImageError: tar or the import fails, or the image is missing afterwards.
    """
    repository, _, version = tag.rpartition(":")
    errors = docker_errors()
    proc = subprocess.Popen(
        ["tar", "-C", str(root), "--numeric-owner", "-c", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None

    def chunks() -> Iterator[bytes]:
        while chunk := proc.stdout.read(1 << 20):  # type: ignore[union-attr]
            yield chunk

    try:
        client.api.import_image(
            src=chunks(), repository=repository, tag=version, changes=changes, stream_src=True
        )
    except errors.DockerException as e:
        proc.kill()
        raise ImageError(f"docker import of {tag} failed: {e}") from e
    finally:
        err = proc.stderr.read() if proc.stderr else b""
        rc = proc.wait()
    if rc != 0:
        raise ImageError(f"tar of the rootfs failed (exit {rc}): {err.decode(errors='replace')[-500:]}")
    info = _get_image(client, tag)
    if info is None:
        raise ImageError(f"docker import reported success but {tag} does not exist")
    return str(info["Id"])


def require_image(client: Any, tag: str) -> dict[str, Any]:
    """The image's attributes; blocking (call via ``asyncio.to_thread``).

    Raises:
        EnvError: ``provision_failed`` naming ``airlock images build`` when it is missing.
    """
    try:
        info = _get_image(client, tag)
    except ImageError as e:
        raise EnvError.provision_failed(str(e)) from e
    if info is None:
        hint = (
            "airlock images build" if tag == runner_image_tag() else f"airlock images build (or build {tag})"
        )
        raise EnvError.provision_failed(f"sandbox image {tag} is missing; build it with: {hint}")
    return info
