"""Kubernetes-style resource quantities → Docker values (pure functions).

Bad strings raise ``ValueError`` with a message naming the field, the value and the
accepted forms; environments turn it into ``EnvError``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[KMGTPE]i|[kKMGTPE]|)\s*$")
_CPU = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<milli>m?)\s*$")

#: Upper bounds that catch typos ("512Gi" of RAM for a sandbox, "2000" CPUs).
MAX_MEMORY = 2**40
MAX_CPUS = 1024
MIN_MEMORY = 6 * 2**20  # Docker refuses less than 6 MiB


def parse_cpu(text: str) -> int:
    """CPUs (``"2"``, ``"0.5"``, ``"500m"``) → Docker ``nano_cpus``.

    Raises:
        ValueError: not a CPU quantity, zero, or absurdly large.
    """
    m = _CPU.match(str(text))
    if not m:
        raise ValueError(f"cpu {text!r} is not a CPU quantity (e.g. '1', '0.5', '500m')")
    try:
        cpus = Decimal(m["num"]) / (1000 if m["milli"] else 1)
    except InvalidOperation as e:  # pragma: no cover - the regex admits only valid numbers
        raise ValueError(f"cpu {text!r} is not a number") from e
    nano = int(cpus * 10**9)
    if nano < 10**6:
        raise ValueError(f"cpu {text!r} is below the minimum of 1m (0.001 CPU)")
    if cpus > MAX_CPUS:
        raise ValueError(f"cpu {text!r} is more than {MAX_CPUS} CPUs")
    return nano


def parse_bytes(text: str, *, field: str = "memory") -> int:
    """A byte quantity (``"512Mi"``, ``"2Gi"``, ``"1G"``, ``"100M"``, ``"1048576"``) → bytes.

    Binary suffixes (``Ki Mi Gi Ti Pi Ei``) are powers of 1024, decimal ones (``k M G T P
    E``) powers of 1000, as in Kubernetes. Fractions are allowed (``"1.5Gi"``) and rounded
    down to whole bytes.

    Raises:
        ValueError: not a quantity, or zero.
    """
    m = _QUANTITY.match(str(text))
    if not m:
        raise ValueError(
            f"{field} {text!r} is not a byte quantity (e.g. '512Mi', '2Gi', '1G', '100M' or plain bytes)"
        )
    unit = m["unit"]
    factor = _BINARY.get(unit) or _DECIMAL.get(unit) or 1
    value = int(Decimal(m["num"]) * factor)
    if value <= 0:
        raise ValueError(f"{field} {text!r} must be more than zero bytes")
    return value


def parse_memory(text: str) -> int:
    """Memory limit → bytes, within Docker's bounds.

    Raises:
        ValueError: bad quantity, below 6 MiB (Docker's minimum) or above 1 TiB.
    """
    value = parse_bytes(text, field="memory")
    if value < MIN_MEMORY:
        raise ValueError(f"memory {text!r} is below Docker's minimum of 6Mi")
    if value > MAX_MEMORY:
        raise ValueError(f"memory {text!r} is more than 1Ti")
    return value


def parse_disk(text: str) -> int:
    """Writable disk (the workspace tmpfs) → bytes.

    Raises:
        ValueError: bad quantity, below 1 MiB or above 1 TiB.
    """
    value = parse_bytes(text, field="disk")
    if value < 2**20:
        raise ValueError(f"disk {text!r} is below the minimum of 1Mi")
    if value > MAX_MEMORY:
        raise ValueError(f"disk {text!r} is more than 1Ti")
    return value


def parse_gpu(text: str) -> int:
    """GPU count: ``"1"``, ``"2"``, or ``"all"`` (→ ``-1``, Docker's "all GPUs").

    Raises:
        ValueError: not a positive whole number or ``all``.
    """
    value = str(text).strip()
    if value.lower() == "all":
        return -1
    if not value.isdigit() or int(value) == 0:
        raise ValueError(f"gpu {text!r} must be a positive whole number of GPUs or 'all'")
    return int(value)


def tmpfs_size(size_bytes: int) -> str:
    """A tmpfs ``size=`` option value (whole KiB, rounded up)."""
    return f"{-(-size_bytes // 1024)}k"
