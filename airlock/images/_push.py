"""``airlock images push REGISTRY``: the runner and controller images, tagged under a registry
and pushed with the engine's credentials (``docker login``), each reported with its digest.

A cluster's nodes pull what the chart names; pinning the digest the registry reported
(``repo@sha256:...``, the chart's ``image.digest``) makes every node run exactly the image
pushed here, whatever the tag later points to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from airlock import __version__
from airlock.errors import ImageError
from layer0 import EnvError

from ._builder import ImageRecipe, find_image
from ._dockerapi import docker_client, docker_errors
from ._reference import image_registry, split_reference


@dataclass(frozen=True)
class PushedImage:
    """One image in the registry."""

    #: The local image pushed (``airlock-runner:<version>``).
    source: str
    #: Its name in the registry (``REGISTRY/airlock-runner``).
    repository: str
    #: The tag pushed.
    tag: str
    #: The manifest's digest the registry reported (``sha256:...``).
    digest: str

    @property
    def pinned(self) -> str:
        """``repository@digest``: the reference a node pulls exactly this image by."""
        return f"{self.repository}@{self.digest}"


def registry_repository(registry: str, recipe: ImageRecipe) -> str:
    """``REGISTRY/<the recipe's repository>`` after checking ``registry`` names a registry host.

    Raises:
        ImageError: ``registry`` is not ``host[:port][/path]``.
    """
    cleaned = registry.rstrip("/")
    if "://" in cleaned:
        raise ImageError(f"registry {registry!r}: give host[:port][/path], without a scheme")
    repository = f"{cleaned}/{recipe.repository}"
    try:
        split_reference(repository)
        named = image_registry(repository)
    except ValueError as e:
        raise ImageError(f"registry {registry!r}: {e}") from e
    if named is None:
        raise ImageError(
            f"registry {registry!r} names no registry host (one with a dot or a port, or localhost; "
            "Docker Hub is docker.io/USER)"
        )
    return repository


async def push_images(
    registry: str,
    recipes: Iterable[ImageRecipe],
    *,
    tag: str = __version__,
    on_step: Callable[[str], None] | None = None,
) -> list[PushedImage]:
    """Tag each recipe's local image ``<repository>:<tag>`` as ``REGISTRY/<repository>:<tag>``
    and push it; the images in order, with their digests.

    Raises:
        ImageError: the registry is malformed, an image is missing locally (the message names
            the build command), the engine is unreachable or the registry refused the push.
    """
    targets = [(recipe, registry_repository(registry, recipe)) for recipe in recipes]
    try:
        client = await asyncio.to_thread(docker_client, 600)
    except EnvError as e:
        raise ImageError(str(e)) from e
    for recipe, _ in targets:  # all present before any push: no half-published release
        await asyncio.to_thread(_require_local, client, recipe, tag)
    pushed = []
    for recipe, repository in targets:
        if on_step is not None:
            on_step(f"pushing {recipe.tag(tag)} to {repository}:{tag}")
        pushed.append(await asyncio.to_thread(_push_one, client, recipe, repository, tag))
    return pushed


def _require_local(client: Any, recipe: ImageRecipe, tag: str) -> None:
    """Blocking.

    Raises:
        ImageError: the recipe's image is not on this engine (the message names the build command).
    """
    if find_image(client, recipe.tag(tag)) is None:
        raise ImageError(
            f"image {recipe.tag(tag)} is missing; build it with: airlock images build --image {recipe.name}"
        )


def _push_one(client: Any, recipe: ImageRecipe, repository: str, tag: str) -> PushedImage:
    """Tag and push one image (blocking); its digest as the registry reported it."""
    source = recipe.tag(tag)
    errors = docker_errors()
    try:
        client.api.tag(source, repository, tag)
        lines = list(client.api.push(repository, tag=tag, stream=True, decode=True))
    except errors.DockerException as e:
        raise ImageError(f"cannot push {repository}:{tag}: {e}") from e
    return PushedImage(source, repository, tag, _digest(lines, f"{repository}:{tag}"))


def _digest(lines: list[dict[str, Any]], target: str) -> str:
    """The pushed manifest's digest from the engine's progress messages.

    Raises:
        ImageError: the engine reported an error, or no digest.
    """
    for line in lines:
        if "error" in line or "errorDetail" in line:
            detail = line.get("errorDetail", {}).get("message") or line.get("error")
            raise ImageError(f"the registry refused {target}: {detail}")
    for line in lines:
        digest = line.get("aux", {}).get("Digest")
        if isinstance(digest, str) and digest.startswith("sha256:"):
            return digest
    raise ImageError(f"pushing {target} reported no digest")
