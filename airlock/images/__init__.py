"""airlock.images: the runner and controller images, built offline (``airlock images build``), and the Docker
client helper the builder and the Docker sandbox backend share."""

from ._builder import (
    CONTROLLER,
    CONTROLLER_IMAGE_REPOSITORY,
    LABEL_DIGEST,
    RECIPES,
    RUNNER,
    RUNNER_IMAGE_REPOSITORY,
    SANDBOX_UID,
    ImageBuildReport,
    ImageRecipe,
    build_image,
    checkout_digest,
    controller_image_tag,
    image_cache_dir,
    require_image,
    runner_image_tag,
)
from ._dockerapi import docker_client, docker_errors

__all__ = [
    "CONTROLLER",
    "CONTROLLER_IMAGE_REPOSITORY",
    "LABEL_DIGEST",
    "RECIPES",
    "RUNNER",
    "RUNNER_IMAGE_REPOSITORY",
    "SANDBOX_UID",
    "ImageBuildReport",
    "ImageRecipe",
    "build_image",
    "checkout_digest",
    "controller_image_tag",
    "docker_client",
    "docker_errors",
    "image_cache_dir",
    "require_image",
    "runner_image_tag",
]
