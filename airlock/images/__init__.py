"""airlock.images: the runner and controller images, built offline (``airlock images build``) and
pushed to a registry with their digests (``airlock images push``), custom sandbox images on the runner
image (``airlock images build --name``), image references, the check that an agent's custom tools
import in its image, the Docker client helper the builder and the Docker sandbox backend share, and
the offline recipe's pieces (resolve a Debian package closure, download and unpack it, import a
directory as an image) for other images built the same way."""

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
    import_rootfs,
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
from ._rootfs import DebPackage, closure_key, download_debs, resolve_closure, unpack_rootfs
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
    "DebPackage",
    "ImageBuildReport",
    "ImageRecipe",
    "PushedImage",
    "ToolCheck",
    "build_custom_image",
    "build_image",
    "check_custom_tools",
    "check_image_reference",
    "checkout_digest",
    "closure_key",
    "controller_image_tag",
    "custom_dockerfile",
    "docker_client",
    "docker_errors",
    "download_debs",
    "find_image",
    "image_cache_dir",
    "image_registry",
    "import_rootfs",
    "push_images",
    "registry_repository",
    "require_image",
    "resolve_closure",
    "runner_image_tag",
    "unpack_rootfs",
]
