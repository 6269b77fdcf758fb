"""The controller image (built offline like the runner's) as the Helm chart deploys it: with
the config the chart renders, the Deployment's own args, and its pod's hardening; it serves
gRPC health without a token (the kubelet's probe), the jobs API with exactly the token from
its Secret file, never prints that token, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import docker
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from airlock.images import CONTROLLER_IMAGE_REPOSITORY, controller_image_tag
from airlock.jobs import ControllerClient, ControllerError
from tests.support.controller_image import run_controller_image, wait_listening
from tests.support.helm import objects, render

pytestmark = pytest.mark.docker


def chart() -> tuple[str, list[str]]:
    """The chart's rendered config (default values) and the Deployment's args."""
    docs = objects(render())
    config_map = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-config")
    )
    config: str = config_map["data"]["airlock.yaml"]
    deployment: dict[str, Any] = next(d for d in docs if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return config, list(container["args"])


def test_the_image_is_the_cli_as_nobody(controller_image: str) -> None:
    attrs = docker.from_env().api.inspect_image(controller_image)
    config = attrs["Config"]
    assert config["Entrypoint"] == ["/opt/venv/bin/airlock"] and config["Cmd"] == ["serve"]
    assert config["User"] == "65534:65534"
    assert config["Labels"]["airlock.image"] == "controller"
    assert controller_image_tag().startswith(CONTROLLER_IMAGE_REPOSITORY + ":")


def test_it_starts_with_the_charts_config_and_serves(controller_image: str, tmp_path: Path) -> None:
    config, args = chart()
    with run_controller_image(config, args, tmp_path) as running:
        wait_listening(running)

        async def calls() -> tuple[int, list[str]]:
            async with grpc.aio.insecure_channel(running.address) as channel:
                health = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=10
                )
            async with ControllerClient(running.address, running.token) as client:
                agents = sorted(str(a["name"]) for a in await client.agents())
            async with ControllerClient(running.address, "wrong-token") as client:
                with pytest.raises(ControllerError) as refused:
                    await client.agents()
            assert refused.value.code == "UNAUTHENTICATED"
            return health.status, agents

        status, agents = asyncio.run(calls())
        assert status == health_pb2.HealthCheckResponse.SERVING
        assert agents == []  # no agent yet; the isolation test's live only in its test pod
        running.container.stop(timeout=30)
        running.container.reload()
        assert running.container.attrs["State"]["ExitCode"] == 0, running.logs()
        assert running.token not in running.logs()
        assert "token: in /var/run/airlock/token/token (not printed)" in running.logs()


def test_a_missing_token_file_stops_it_with_exit_3(controller_image: str, tmp_path: Path) -> None:
    config, args = chart()
    args = [a if a != "/var/run/airlock/token/token" else "/var/run/airlock/token/absent" for a in args]
    with run_controller_image(config, args, tmp_path) as running:
        exit_code = running.container.wait(timeout=60)["StatusCode"]
        assert exit_code == 3, running.logs()
        assert "cannot read the token file /var/run/airlock/token/absent" in running.logs()


def test_it_holds_the_s3_blob_stores_client(controller_image: str) -> None:
    """The chart's ``workspaces.store: s3`` needs boto3 in the image (installed without its
    dependencies: botocore's dateutil pin conflicts with kubernetes'); the store opens (no call
    is made until a blob moves)."""
    script = (
        "import boto3, botocore, dateutil, kubernetes;"
        "from airlock.controller._blobs_open import open_blob_store;"
        "s = open_blob_store('s3://bucket/prefix', '/tmp', endpoint_url='http://127.0.0.1:9');"
        "print(type(s).__name__, boto3.__version__)"
    )
    out = docker.from_env().containers.run(
        controller_image,
        entrypoint=["/opt/venv/bin/python", "-c", script],
        remove=True,
        network_mode="none",
        environment={
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
    )
    assert out.decode().startswith("S3BlobStore "), out
