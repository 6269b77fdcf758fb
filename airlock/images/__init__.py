"""airlock.images: the runner image, built offline (``airlock images build``), and the Docker
client helper the builder and the Docker sandbox backend share."""

from ._builder import (
    LABEL_DIGEST,
    RUNNER_IMAGE_REPOSITORY,
    SANDBOX_UID,
    ImageBuildReport,
    build_runner_image,
    checkout_digest,
    image_cache_dir,
    require_image,
    runner_image_tag,
)
from ._dockerapi import docker_client, docker_errors

__all__ = [
    "LABEL_DIGEST",
    "RUNNER_IMAGE_REPOSITORY",
    "SANDBOX_UID",
    "ImageBuildReport",
    "build_runner_image",
    "checkout_digest",
    "docker_client",
    "docker_errors",
    "image_cache_dir",
    "require_image",
    "runner_image_tag",
]
