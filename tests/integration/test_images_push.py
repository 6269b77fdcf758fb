"""``airlock images push REGISTRY`` against a real registry on this machine (Debian's
``docker-registry``): both images are tagged under it and pushed by the engine, each printed as
``repo@sha256:...``; the registry's v2 API lists the tags and gives the same digests. A registry
that refuses the push, and an image not built, fail with exit 1 and a message saying which.

The images pushed are small ones the test creates under the runner's and the controller's
repositories with a tag of its own (the push does not depend on what the images hold), removed
afterwards with every tag the push added.
"""

from __future__ import annotations

import io
import json
import tarfile
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.images import CONTROLLER_IMAGE_REPOSITORY, RUNNER_IMAGE_REPOSITORY
from tests.support.registry import local_registry, registry_digest, registry_tags

pytestmark = pytest.mark.docker

REPOSITORIES = (RUNNER_IMAGE_REPOSITORY, CONTROLLER_IMAGE_REPOSITORY)


def _layer(text: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("marker.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def engine() -> Iterator[Any]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture
def tag(engine: Any) -> Iterator[str]:
    """A tag of the test's own on two small images, one per repository; every tag the test
    created on them (here and by the push) is removed afterwards."""
    tag = f"push-test-{uuid.uuid4().hex[:12]}"
    for repository in REPOSITORIES:
        engine.api.import_image_from_data(_layer(f"{repository} {tag}"), repository=repository, tag=tag)
    yield tag
    remove_tagged(engine, tag)


def remove_tagged(engine: Any, tag: str) -> None:
    """Remove every image name ending in ``:tag`` (the test's own, and what a push added)."""
    names = {
        name
        for pattern in (f"*:{tag}", f"*/*:{tag}", f"*/*/*:{tag}")
        for image in engine.images.list(filters={"reference": pattern})
        for name in image.tags
        if name.endswith(f":{tag}")
    }
    for name in sorted(names, key=len, reverse=True):
        engine.api.remove_image(name)


def test_push_tags_and_pushes_both_images_printing_their_digests(
    engine: Any, tag: str, tmp_path: Path
) -> None:
    with local_registry(tmp_path) as registry:
        result = CliRunner().invoke(app, ["images", "push", f"{registry}/team", "--tag", tag])
        assert result.exit_code == 0, result.output
        printed = result.stdout.split()
        assert [line.split("@")[0] for line in printed] == [f"{registry}/team/{r}" for r in REPOSITORIES]
        for line, repository in zip(printed, REPOSITORIES, strict=True):
            digest = line.split("@")[1]
            assert registry_tags(registry, f"team/{repository}") == [tag]
            assert registry_digest(registry, f"team/{repository}", tag) == digest
            # The engine recorded the same digest for the image it pushed.
            assert line in engine.api.inspect_image(f"{repository}:{tag}")["RepoDigests"]


def test_push_one_image(engine: Any, tag: str, tmp_path: Path) -> None:
    with local_registry(tmp_path) as registry:
        result = CliRunner().invoke(app, ["images", "push", registry, "--image", "controller", "--tag", tag])
        assert result.exit_code == 0, result.output
        (line,) = result.stdout.split()
        assert line.startswith(f"{registry}/{CONTROLLER_IMAGE_REPOSITORY}@sha256:")
        assert registry_tags(registry, CONTROLLER_IMAGE_REPOSITORY) == [tag]


def test_a_registry_that_refuses_the_push_fails_with_its_reason(
    engine: Any, tag: str, tmp_path: Path
) -> None:
    with local_registry(tmp_path, read_only=True) as registry:
        result = CliRunner().invoke(app, ["images", "push", registry, "--image", "runner", "--tag", tag])
    assert result.exit_code == 1
    assert f"the registry refused {registry}/{RUNNER_IMAGE_REPOSITORY}:{tag}" in " ".join(
        result.stderr.split()
    )
    assert result.stdout == ""


def test_an_image_not_built_fails_naming_the_build_command(tmp_path: Path) -> None:
    with local_registry(tmp_path) as registry:
        missing = f"never-built-{uuid.uuid4().hex[:8]}"
        result = CliRunner().invoke(app, ["images", "push", registry, "--tag", missing])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert f"{RUNNER_IMAGE_REPOSITORY}:{missing} is missing" in message
    assert "airlock images build --image runner" in message


def test_nothing_is_pushed_unless_every_image_is_there(engine: Any, tmp_path: Path) -> None:
    """The runner exists, the controller does not: the push fails before sending the runner."""
    tag = f"push-test-{uuid.uuid4().hex[:12]}"
    engine.api.import_image_from_data(_layer("runner only"), repository=RUNNER_IMAGE_REPOSITORY, tag=tag)
    try:
        with local_registry(tmp_path) as registry:
            result = CliRunner().invoke(app, ["images", "push", registry, "--tag", tag])
            assert result.exit_code == 1
            assert f"{CONTROLLER_IMAGE_REPOSITORY}:{tag} is missing" in " ".join(result.stderr.split())
            with urllib.request.urlopen(f"http://{registry}/v2/_catalog", timeout=10) as answer:
                assert json.load(answer)["repositories"] == []
    finally:
        remove_tagged(engine, tag)


@pytest.mark.parametrize(
    ("registry", "reason"),
    [("https://registry.example.com", "without a scheme"), ("team", "names no registry host")],
)
def test_a_malformed_registry_is_refused_before_any_push(registry: str, reason: str) -> None:
    result = CliRunner().invoke(app, ["images", "push", registry])
    assert result.exit_code == 2
    assert reason in " ".join(result.stderr.split())
