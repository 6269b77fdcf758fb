"""A local S3-compatible server for the tests: moto's server mode, started on 127.0.0.1 from its
own virtualenv (``.venv-moto``, made by ``scripts/setup.sh``: moto pins python-dateutil below 3,
which kubernetes 37 in the main one refuses). Skipped without it unless ``AIRLOCK_REQUIRE_S3=1``."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MOTO_SERVER = Path(__file__).resolve().parents[2] / ".venv-moto" / "bin" / "moto_server"
#: What boto3 needs to talk to the local server (moto accepts any credentials).
S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server this session started on a free loopback port."""
    if not MOTO_SERVER.exists():
        if os.environ.get("AIRLOCK_REQUIRE_S3") == "1":
            pytest.fail(f"AIRLOCK_REQUIRE_S3=1 but {MOTO_SERVER} is missing (scripts/setup.sh makes it)")
        pytest.skip(f"no local S3 server: {MOTO_SERVER} is missing (scripts/setup.sh makes it)")
    port = _free_port()
    proc = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the local S3 server (moto) did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client of the local server."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=S3_ENV["AWS_DEFAULT_REGION"],
        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
    )


def new_bucket(client: Any) -> str:
    """A fresh bucket of the local server."""
    bucket = f"b{os.getpid()}-{time.monotonic_ns()}"
    client.create_bucket(Bucket=bucket)
    return bucket
