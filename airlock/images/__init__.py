"""airlock.images: the runner and controller images, built offline (``airlock images build``) and
pushed to a registry with their digests (``airlock images push``), custom sandbox images on the runner
image (``airlock images build --name``), image references, the check that an agent's custom tools
import in its image, and the Docker client helper the builder and the Docker sandbox backend share."""

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
    find_image,
    image_cache_dir,
    require_image,
    runner_image_tag,
)
from ._custom_image import (
    LABEL_CUSTOM_BASE,
    LABEL_CUSTOM_DIGEST,
    LABEL_CUSTOM_PACKAGES,
    LABEL_CUSTOM_REQUIREMENTS,
    LABEL_CUSTOM_WHEELS,
    CustomImageSpec,
    build_custom_image,
    custom_dockerfile,
)
from ._dockerapi import docker_client, docker_errors
from ._push import PushedImage, push_images, registry_repository
from ._reference import check_image_reference, image_registry
from ._tool_check import ToolCheck, check_custom_tools

__all__ = [
    "CONTROLLER",
    "CONTROLLER_IMAGE_REPOSITORY",
    "LABEL_CUSTOM_BASE",
    "LABEL_CUSTOM_DIGEST",
    "LABEL_CUSTOM_PACKAGES",
    "LABEL_CUSTOM_REQUIREMENTS",
    "LABEL_CUSTOM_WHEELS",
    "LABEL_DIGEST",
    "RECIPES",
    "RUNNER",
    "RUNNER_IMAGE_REPOSITORY",
    "SANDBOX_UID",
    "CustomImageSpec",
    "ImageBuildReport",
    "ImageRecipe",
    "PushedImage",
    "ToolCheck",
    "build_custom_image",
    "build_image",
    "check_custom_tools",
    "check_image_reference",
    "checkout_digest",
    "controller_image_tag",
    "custom_dockerfile",
    "docker_client",
    "docker_errors",
    "find_image",
    "image_cache_dir",
    "image_registry",
    "push_images",
    "registry_repository",
    "require_image",
    "runner_image_tag",
]
