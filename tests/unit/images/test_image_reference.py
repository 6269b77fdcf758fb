"""Image references as the kubelet reads them: a registry only when the first component looks
like a host, tags and sha256 digests checked, and the registry a push targets validated."""

from __future__ import annotations

import pytest

from airlock.errors import ImageError
from airlock.images import RUNNER, check_image_reference, image_registry, registry_repository

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("reference", "registry"),
    [
        ("airlock-runner:0.1.0", None),
        ("team/airlock-runner:1", None),
        ("localhost/airlock-runner", "localhost"),
        ("127.0.0.1:5000/airlock-runner:1", "127.0.0.1:5000"),
        ("registry.example.com/team/airlock-runner:1", "registry.example.com"),
        (f"registry.example.com/airlock-runner@{DIGEST}", "registry.example.com"),
        (f"registry.example.com:443/airlock-runner:1@{DIGEST}", "registry.example.com:443"),
    ],
)
def test_the_registry_of_a_reference(reference: str, registry: str | None) -> None:
    assert check_image_reference(reference) == reference
    assert image_registry(reference) == registry


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("registry.example.com/airlock-runner@sha256:abc", "the digest must be sha256"),
        (f"registry.example.com/airlock-runner@md5:{'a' * 32}", "the digest must be sha256"),
        ("registry.example.com/Airlock-Runner:1", "is not an image path"),
        ("registry.example.com/airlock-runner:-bad", "is not a tag"),
        ("bad_host.example.com/airlock-runner", "is not a registry host"),
        ("", "is not an image path"),
    ],
)
def test_a_malformed_reference_is_refused_saying_which_part(reference: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_image_reference(reference)


def test_the_repository_a_push_targets() -> None:
    assert (
        registry_repository("registry.example.com/team/", RUNNER)
        == "registry.example.com/team/airlock-runner"
    )
    with pytest.raises(ImageError, match="names no registry host"):
        registry_repository("team", RUNNER)
    with pytest.raises(ImageError, match="without a scheme"):
        registry_repository("https://registry.example.com", RUNNER)
