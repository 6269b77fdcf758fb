"""Custom sandbox images: the runner image plus the packages an agent's custom tools need.

``airlock images build --name NAME [--requirements FILE] [--wheel PATH …]`` builds NAME on the
local runner image with no registry and no index inside the build:

1. The base image says what it holds (:mod:`._image_facts`): its Python, glibc, machine and
   packages. Each ``--wheel`` must fit it (:mod:`._wheel_tags`).
2. ``pip download`` fetches, on the host, binary wheels of the requirements and of the local
   wheels' dependencies for the *image's* interpreter and platform, constrained to the
   versions the image already holds (installing never replaces a package the runner needs).
3. The legacy builder (no BuildKit: no ``RUN --mount``) runs a Dockerfile ``FROM`` the local
   base tag with no network: the wheels are installed with ``pip install --no-index`` into
   the image's venv, the new modules are byte-compiled as unchecked-hash pycs (a read-only
   sandbox never compiles), and the wheels are removed. Labels record the base, the
   requirements, the local wheels (with hashes) and every package offered.

A failed step leaves nothing behind: the builder's intermediate containers and untagged
layers carry the build's own label and are removed. An image built from the same inputs
is not rebuilt (``force`` does). :func:`custom_dockerfile` gives the same recipe for users
with a registry, ``FROM`` the runner image there, installing from their index.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.errors import ImageError, shorten

from ._builder import (
    CONTROLLER_IMAGE_REPOSITORY,
    RUNNER_IMAGE_REPOSITORY,
    SANDBOX_UID,
    VENV,
    ImageBuildReport,
    Progress,
    StepTimer,
    _client,
    _get_image,
    _remove_quietly_reporting,
    image_cache_dir,
    runner_image_tag,
)
from ._dockerapi import docker_errors
from ._image_facts import image_facts
from ._proc import run_command
from ._requirements import read_requirements
from ._wheel_tags import check_wheel_fits, parse_wheel_name
from ._wheels import WheelTarget

__all__ = [
    "LABEL_CUSTOM_BASE",
    "LABEL_CUSTOM_DIGEST",
    "LABEL_CUSTOM_PACKAGES",
    "LABEL_CUSTOM_REQUIREMENTS",
    "LABEL_CUSTOM_WHEELS",
    "CustomImageSpec",
    "build_custom_image",
    "custom_dockerfile",
]

#: Bumped when the recipe changes in a way its inputs would not show.
CUSTOM_RECIPE_VERSION = "1"
LABEL_CUSTOM_BASE = "airlock.custom.base"
LABEL_CUSTOM_BASE_ID = "airlock.custom.base-id"
LABEL_CUSTOM_REQUIREMENTS = "airlock.custom.requirements"
LABEL_CUSTOM_WHEELS = "airlock.custom.wheels"
LABEL_CUSTOM_PACKAGES = "airlock.custom.packages"
LABEL_CUSTOM_DIGEST = "airlock.custom.digest"
#: The build's own id: what its intermediate containers and layers carry until it ends.
LABEL_CUSTOM_BUILD = "airlock.custom.build"
#: Where the build stages its files inside the image (removed in the same layer).
STAGE = "/tmp/airlock-custom"
#: Seconds ``pip download`` may take.
DOWNLOAD_TIMEOUT_S = 900.0
_NAME = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"
)


@dataclass(frozen=True)
class CustomImageSpec:
    """What goes into a custom image.

    Attributes:
        name: the image to build (``repository[:tag]``).
        base: the runner image it is built on.
        requirements: requirements by name (from a requirements file).
        wheels: local wheel files.
        requirements_file: the file the requirements came from (its name is used by the
            registry Dockerfile).
    """

    name: str
    base: str = field(default_factory=runner_image_tag)
    requirements: tuple[str, ...] = ()
    wheels: tuple[Path, ...] = ()
    requirements_file: Path | None = None

    @classmethod
    def create(
        cls,
        name: str,
        *,
        base: str | None = None,
        requirements_file: Path | None = None,
        wheels: Sequence[Path] = (),
    ) -> CustomImageSpec:
        """A spec from the command's arguments, each checked.

        Raises:
            ImageError: an invalid image name, a name that would replace airlock's own images,
                nothing to install, an unreadable or invalid requirements file, a wheel that is
                missing or not a wheel, or two wheels of one file name.
        """
        problems = [*_name_problems(name, "image name")]
        if base is not None:
            problems += [*_name_problems(base, "base image", own_ok=True)]
        requirements: list[str] = []
        if requirements_file is not None:
            requirements = read_requirements(requirements_file)
        names: dict[str, Path] = {}
        for wheel in wheels:
            if not wheel.is_file():
                problems.append(f"wheel {wheel} does not exist (or is not a file)")
                continue
            try:
                parse_wheel_name(wheel.name)
            except ImageError as e:
                problems.append(str(e))
                continue
            if wheel.name in names:
                problems.append(f"wheel {wheel.name} is given twice ({names[wheel.name]} and {wheel})")
            names[wheel.name] = wheel
        if not requirements and not wheels and not problems:
            problems.append(
                "nothing to install: give --requirements FILE (with a requirement) and/or --wheel FILE"
            )
        if problems:
            raise ImageError("\n".join(problems))
        return cls(
            name=name,
            base=base or runner_image_tag(),
            requirements=tuple(requirements),
            wheels=tuple(w.absolute() for w in wheels),
            requirements_file=requirements_file,
        )


def _name_problems(name: str, what: str, *, own_ok: bool = False) -> list[str]:
    if not _NAME.match(name):
        return [
            f"{what} {shorten(name, 200)!r} is not a valid image reference (repository[:tag], lower case)"
        ]
    repository = name.rsplit("/", 1)[-1].split(":", 1)[0]
    if not own_ok and repository in (RUNNER_IMAGE_REPOSITORY, CONTROLLER_IMAGE_REPOSITORY):
        return [f"{what} {name!r} would replace airlock's own {repository} image; choose another name"]
    return []


def canonical_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Word_Count`` is ``word-count``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _kept(installed: Sequence[str], replaced: Sequence[str]) -> list[str]:
    """The ``name==version`` lines of ``installed`` whose distribution is not in ``replaced``."""
    names = {canonical_name(n) for n in replaced}
    return [p for p in installed if canonical_name(p.split("==", 1)[0]) not in names]


def _install_script(install_args: Sequence[str], replaced: Sequence[str]) -> str:
    """The one RUN step: pin what the image holds (but the distributions of the local wheels,
    which may replace theirs), install, byte-compile what it added, remove the staged files."""
    pip = f"{VENV}/bin/pip"
    python = f"{VENV}/bin/python"
    freeze = f"{pip} list --format=freeze --disable-pip-version-check"
    if replaced:
        pattern = "|".join(re.sub(r"[-_.]+", "[-_.]+", canonical_name(n)) for n in sorted(set(replaced)))
        freeze += f" | {{ grep -v -i -E '^({pattern})==' || true; }}"
    return " \\\n    ".join(
        [
            f"set -e; touch {STAGE}/.start;",
            f"{freeze} > {STAGE}/constraints.txt;",
            f"{pip} install -q --no-cache-dir --no-compile --disable-pip-version-check "
            f"-c {STAGE}/constraints.txt {' '.join(install_args)};",
            f"find {VENV} -newer {STAGE}/.start -name '*.py' -print0 | xargs -0 -r {python} -m compileall "
            "-q -f --invalidation-mode unchecked-hash || echo 'warning: some modules did not compile';",
            f"rm -rf {STAGE}",
        ]
    )


def _label_lines(labels: Mapping[str, str]) -> list[str]:
    """One LABEL instruction (one layer) setting every label."""

    def quoted(value: str) -> str:
        return json.dumps(value, ensure_ascii=False).replace("$", "\\$")

    pairs = [f"{key}={quoted(value)}" for key, value in labels.items()]
    return ["LABEL " + " \\\n      ".join(pairs)] if pairs else []


def offline_dockerfile(spec: CustomImageSpec, labels: Mapping[str, str], build_id: str) -> str:
    """The Dockerfile of the offline build: its context holds ``requirements.txt`` and
    ``wheels/`` (every wheel, downloaded or local); nothing is fetched during the build."""
    install = [f"--no-index --find-links {STAGE}/wheels -r {STAGE}/requirements.txt"]
    install += [f"{STAGE}/wheels/{w.name}" for w in spec.wheels]
    replaced = [parse_wheel_name(w.name).name for w in spec.wheels]
    lines = [
        f"# airlock custom sandbox image {spec.name}: {spec.base} plus the packages labelled below.",
        f"FROM {spec.base}",
        f"LABEL {LABEL_CUSTOM_BUILD}={json.dumps(build_id)}",
        "USER 0:0",
        f"COPY requirements.txt {STAGE}/requirements.txt",
        f"COPY wheels/ {STAGE}/wheels/",
        f"RUN {_install_script(install, replaced)}",
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        *_label_lines(labels),
    ]
    return "\n".join(lines) + "\n"


def custom_dockerfile(spec: CustomImageSpec) -> str:
    """The same recipe for a registry: ``FROM`` the runner image (push it there and put its
    name on the FROM line), installing from the index pip is configured with. Its build
    context holds the requirements file and the local wheels, under their own names."""
    files = ([spec.requirements_file.name] if spec.requirements_file is not None else []) + [
        w.name for w in spec.wheels
    ]
    install = ["--only-binary=:all:"]
    if spec.requirements_file is not None:
        install.append(f"-r {STAGE}/{spec.requirements_file.name}")
    install += [f"{STAGE}/{w.name}" for w in spec.wheels]
    replaced = [parse_wheel_name(w.name).name for w in spec.wheels]
    labels = {
        "airlock.image": "custom",
        LABEL_CUSTOM_BASE: spec.base,
        LABEL_CUSTOM_REQUIREMENTS: "; ".join(spec.requirements),
        LABEL_CUSTOM_WHEELS: " ".join(w.name for w in spec.wheels),
    }
    lines = [
        f"# airlock custom sandbox image {spec.name}, for a registry: the runner image plus the",
        "# packages below, installed from your package index. Put this file next to",
        f"# {', '.join(files)} and run: docker build -t {spec.name} .",
        "# (without a registry, `airlock images build --name ...` builds the same image offline)",
        f"FROM {spec.base}",
        "USER 0:0",
        f"COPY {' '.join(files)} {STAGE}/",
        f"RUN {_install_script(install, replaced)}",
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        *_label_lines(labels),
    ]
    return "\n".join(lines) + "\n"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _digest(spec: CustomImageSpec, base_id: str, wheel_hashes: Mapping[str, str]) -> str:
    data = {
        "recipe": CUSTOM_RECIPE_VERSION,
        "base_id": base_id,
        "requirements": list(spec.requirements),
        "wheels": sorted(wheel_hashes.items()),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


async def build_custom_image(
    spec: CustomImageSpec,
    *,
    force: bool = False,
    pip_options: Sequence[str] = (),
    on_step: Progress | None = None,
) -> ImageBuildReport:
    """Build ``spec``'s image offline on its local base image (see the module docstring).

    Args:
        force: rebuild even when an image of the same inputs exists.
        pip_options: extra ``pip download`` options (``--find-links DIR``, ``--no-index``).
        on_step: called with a short description as each step starts.

    Raises:
        ImageError: the base image is missing, a wheel does not fit the image, a requirement
            cannot be downloaded for the image's platform, or the build failed (the message
            names the step and carries its error output).
    """
    started = time.perf_counter()
    say = on_step or (lambda _msg: None)
    step = StepTimer()

    client = await _client()
    base = await asyncio.to_thread(_get_image, client, spec.base)
    if base is None:
        hint = (
            "airlock images build --image runner" if spec.base == runner_image_tag() else f"build {spec.base}"
        )
        raise ImageError(f"the base image {spec.base} is missing; build it first: {hint}")
    hashes = {w.name: await asyncio.to_thread(_sha256, w) for w in spec.wheels}
    digest = _digest(spec, base["Id"], hashes)
    existing = await asyncio.to_thread(_get_image, client, spec.name)
    if (
        existing is not None
        and not force
        and (existing["Config"]["Labels"] or {}).get(LABEL_CUSTOM_DIGEST) == digest
    ):
        return ImageBuildReport(
            spec.name, existing["Id"], True, time.perf_counter() - started, size_bytes=existing["Size"]
        )

    say(f"reading the Python of {spec.base}")
    facts = await image_facts(client, spec.base, f"{VENV}/bin/python")
    target = facts.target()
    for wheel in spec.wheels:
        await asyncio.to_thread(check_wheel_fits, wheel, target)
    step("read the base image")
    with tempfile.TemporaryDirectory(prefix="airlock-custom-") as tmp:
        context = Path(tmp) / "context"
        wheels = context / "wheels"
        await asyncio.to_thread(_stage, context, spec)
        say(f"downloading wheels for CPython {target.python} on {target.machine} (on this host)")
        await _download(spec, target, facts.packages, wheels, Path(tmp) / "constraints.txt", pip_options)
        step("pip download (host)")
        offered = await asyncio.to_thread(lambda: sorted(wheels.glob("*.whl")))
        labels = {
            "airlock.image": "custom",
            LABEL_CUSTOM_BASE: spec.base,
            LABEL_CUSTOM_BASE_ID: base["Id"],
            LABEL_CUSTOM_REQUIREMENTS: "; ".join(spec.requirements),
            LABEL_CUSTOM_WHEELS: " ".join(f"{name}@sha256:{sha[:16]}" for name, sha in hashes.items()),
            LABEL_CUSTOM_PACKAGES: " ".join(
                f"{w.name}=={w.version}" for w in (parse_wheel_name(p.name) for p in offered)
            ),
            LABEL_CUSTOM_DIGEST: digest,
        }
        build_id = uuid.uuid4().hex[:16]
        dockerfile = offline_dockerfile(spec, labels, build_id)
        await asyncio.to_thread((context / "Dockerfile").write_text, dockerfile)
        say(f"building {spec.name} on {spec.base} (no network)")
        info = await asyncio.to_thread(_docker_build, client, context, spec.name, build_id)
        step("docker build (offline)")
    image_id = str(info["Id"])
    removed = None
    if existing is not None and existing["Id"] != image_id:
        removed = await asyncio.to_thread(_remove_quietly_reporting, client, existing["Id"])
    return ImageBuildReport(
        spec.name, image_id, False, time.perf_counter() - started, step.steps, info["Size"], removed
    )


def _stage(context: Path, spec: CustomImageSpec) -> None:
    (context / "wheels").mkdir(parents=True)
    for wheel in spec.wheels:
        shutil.copy2(wheel, context / "wheels" / wheel.name)
    (context / "requirements.txt").write_text("".join(f"{r}\n" for r in spec.requirements))


async def _download(
    spec: CustomImageSpec,
    target: WheelTarget,
    installed: Sequence[str],
    dest: Path,
    constraints: Path,
    pip_options: Sequence[str],
) -> None:
    """``pip download`` the requirements and the local wheels' dependencies into ``dest``."""
    kept = _kept(installed, [parse_wheel_name(w.name).name for w in spec.wheels])
    await asyncio.to_thread(constraints.write_text, "".join(f"{p}\n" for p in kept))
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *target.pip_args(local_builds=True),
        "-c",
        str(constraints),
        *_runner_wheelhouse(target),
        *pip_options,
        *spec.requirements,
        *(str(dest / w.name) for w in spec.wheels),
    ]
    platform = f"CPython {target.python}, {target.machine}, glibc {target.glibc[0]}.{target.glibc[1]}"
    try:
        await asyncio.wait_for(run_command(argv, what="pip download"), DOWNLOAD_TIMEOUT_S)
    except TimeoutError as e:
        raise ImageError(
            f"downloading the wheels for {spec.name} did not finish within {DOWNLOAD_TIMEOUT_S:g}s"
        ) from e
    except ImageError as e:
        raise ImageError(
            f"cannot download binary wheels for {spec.name} ({platform}; the versions {spec.base} already "
            f"holds are kept): {e}"
        ) from e


def _runner_wheelhouse(target: WheelTarget) -> list[str]:
    """``--find-links`` to the wheels the local runner image was built from, for ``target``:
    a local wheel's dependencies that the base already holds (``mcp`` for an MCP server) are
    then found offline, at the versions the constraints keep."""
    py, (major, minor) = target.python.replace(".", ""), target.glibc
    found = sorted((image_cache_dir() / "wheels").glob(f"cp{py}-glibc{major}.{minor}-{target.dpkg_arch}"))
    return [arg for d in found if d.is_dir() for arg in ("--find-links", str(d))]


def _docker_build(client: Any, context: Path, tag: str, build_id: str) -> dict[str, Any]:
    """Run the legacy builder on ``context`` with no network; the new image's attributes. Whatever
    the build leaves behind on failure (a stopped container, untagged layers) is removed."""
    errors = docker_errors()
    log: collections.deque[str] = collections.deque(maxlen=30)
    failure: BaseException | None = None
    try:
        for chunk in client.api.build(
            path=str(context),
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
            decode=True,
        ):
            if "stream" in chunk:
                log.extend(line for line in str(chunk["stream"]).splitlines() if line.strip())
            if "error" in chunk:
                output = "\n".join(log)
                raise ImageError(f"docker build of {tag} failed: {str(chunk['error']).strip()}\n{output}")
    except errors.DockerException as e:
        failure = ImageError(f"docker build of {tag} failed: Docker engine error: {shorten(str(e), 800)}")
        failure.__cause__ = e
    except BaseException as e:  # ImageError above, or an interrupt: nothing may stay behind
        failure = e
    if failure is not None:
        left = _remove_leftovers(client, build_id)
        if left and isinstance(failure, ImageError):
            raise ImageError(f"{failure}\n(the failed build also left: {'; '.join(left)})") from failure
        raise failure
    info = _get_image(client, tag)
    if info is None:
        raise ImageError(f"docker build reported success but {tag} does not exist")
    return info


def _remove_leftovers(client: Any, build_id: str) -> list[str]:
    """Remove the containers and untagged layers a failed build of ``build_id`` left; what
    could not be removed (each named, with why)."""
    errors = docker_errors()
    selector = {"label": f"{LABEL_CUSTOM_BUILD}={build_id}"}
    failed: list[str] = []
    try:
        containers = client.api.containers(all=True, filters=selector)
        layers = client.api.images(all=True, filters={**selector, "dangling": True})
    except errors.DockerException as e:
        return [f"(cannot list them: {e}) containers and images labelled {LABEL_CUSTOM_BUILD}={build_id}"]
    for container in containers:
        try:
            client.api.remove_container(container["Id"], force=True)
        except errors.NotFound:
            pass
        except errors.DockerException as e:
            failed.append(f"container {container['Id'][:12]}: {e}")
    # Newest first: a layer is removable once the layers built on it are gone.
    for image in sorted(layers, key=lambda i: i.get("Created", 0), reverse=True):
        try:
            client.api.remove_image(image["Id"], noprune=False)
        except errors.NotFound:
            pass
        except errors.DockerException as e:
            failed.append(f"image {image['Id'][:19]}: {e}")
    return failed
