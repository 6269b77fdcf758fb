"""moto's S3 server for the tests (from ``.venv-moto``, started on a free 127.0.0.1 port), a
client of it, and fresh buckets on it. Without ``.venv-moto`` a test using it is skipped,
unless ``AIRLOCK_REQUIRE_S3=1`` (then it fails)."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: moto's server, in the checkout's own venv for it (scripts/setup.sh makes it).
MOTO = Path(__file__).resolve().parents[2] / ".venv-moto" / "bin" / "moto_server"

#: The credentials and region moto accepts (any will do; these are what clients are given).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


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


def moto_server() -> Iterator[str]:
    """A moto S3 server on a free local port, for a fixture to ``yield from``: its endpoint URL
    (skipped without ``.venv-moto`` unless ``AIRLOCK_REQUIRE_S3=1``); stopped afterwards."""
    if not MOTO.exists():
        if os.environ.get("AIRLOCK_REQUIRE_S3") == "1":
            pytest.fail(f"AIRLOCK_REQUIRE_S3=1 but {MOTO} is missing (scripts/setup.sh makes it)")
        pytest.skip(f"no moto server at {MOTO} (scripts/setup.sh makes .venv-moto)")
    port = _free_port()
    proc = subprocess.Popen(
        [str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            if _answers(port) or proc.poll() is not None:
                break
            time.sleep(0.1)
        if proc.poll() is not None or not _answers(port):
            pytest.fail("the moto server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client of the server at ``endpoint``."""
    boto3 = importlib.import_module("boto3")
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def new_bucket(client: Any) -> str:
    """A new empty bucket's name (unique to this process and moment)."""
    bucket = f"b{os.getpid()}{time.monotonic_ns()}"
    client.create_bucket(Bucket=bucket)
    return bucket
