"""Resource quantities → Docker values."""

from __future__ import annotations

import pytest

from airlock.policy.resources import (
    parse_bytes,
    parse_cpu,
    parse_disk,
    parse_gpu,
    parse_memory,
    tmpfs_size,
)


@pytest.mark.parametrize(
    ("text", "nano"),
    [
        ("2", 2_000_000_000),
        ("0.5", 500_000_000),
        ("500m", 500_000_000),
        ("1500m", 1_500_000_000),
        (".25", 250_000_000),
        ("1m", 1_000_000),
        (" 1 ", 1_000_000_000),
    ],
)
def test_cpu(text: str, nano: int) -> None:
    assert parse_cpu(text) == nano


@pytest.mark.parametrize("text", ["", "abc", "-1", "0", "0m", "1.5.2", "2 cpus", "500u", "1e3", "2000"])
def test_bad_cpu(text: str) -> None:
    with pytest.raises(ValueError, match="cpu"):
        parse_cpu(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512Mi", 512 * 2**20),
        ("2Gi", 2 * 2**30),
        ("1G", 10**9),
        ("100M", 100 * 10**6),
        ("1048576", 1048576),
        ("1.5Gi", 3 * 2**29),
        ("64Ki", 65536),
        ("1k", 1000),
    ],
)
def test_bytes(text: str, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize("text", ["", "Mi", "12MB", "1 GiB", "-5Mi", "0", "0Mi", "1x", "ten"])
def test_bad_bytes(text: str) -> None:
    with pytest.raises(ValueError, match="memory"):
        parse_memory(text)


def test_memory_bounds() -> None:
    with pytest.raises(ValueError, match="minimum of 6Mi"):
        parse_memory("1Mi")
    with pytest.raises(ValueError, match="more than 1Ti"):
        parse_memory("2Ti")
    assert parse_memory("6Mi") == 6 * 2**20


def test_disk_and_tmpfs_size() -> None:
    assert parse_disk("256Mi") == 256 * 2**20
    with pytest.raises(ValueError, match="disk"):
        parse_disk("lots")
    with pytest.raises(ValueError, match="minimum of 1Mi"):
        parse_disk("10Ki")
    assert tmpfs_size(256 * 2**20) == "262144k"
    assert tmpfs_size(1000) == "1k"


def test_gpu() -> None:
    assert parse_gpu("1") == 1
    assert parse_gpu("all") == -1
    for bad in ("0", "-1", "half", "1.5"):
        with pytest.raises(ValueError, match="gpu"):
            parse_gpu(bad)
