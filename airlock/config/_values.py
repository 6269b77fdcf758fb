"""Parsers for the small value languages used in agent configuration."""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal
from typing import Any

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
#: The longest duration accepted: a google.protobuf.Duration's range (about 10,000 years).
#: Longer limits would not fit the wire or the job store's 64-bit integers.
MAX_DURATION_MS = 315_576_000_000_000
_UNIT_ORDER = ["h", "m", "s", "ms"]

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Prefixes of well-known API keys and tokens: such text is a value, never a name.
_SECRET_PREFIXES = ("sk-", "sk_", "ghp_", "gho_", "ghs_", "github_pat_", "xoxb-", "xoxp-", "akia", "aiza")


def parse_duration(value: Any) -> int:
    """A duration as whole milliseconds.

    Accepts an integer (milliseconds) or a string of ``<number><unit>`` parts with units
    ``h``, ``m``, ``s``, ``ms`` in that order (``"90s"``, ``"5m"``, ``"1h30m"``, ``"1.5s"``,
    ``"250ms"``). The result must be a positive whole number of milliseconds, at most
    :data:`MAX_DURATION_MS`.

    Raises:
        ValueError: anything else (floats, booleans, unknown units, sub-millisecond parts).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError('give a duration string like "90s", "5m", "1h30m" or integer milliseconds')
    if isinstance(value, int):
        total = value
    else:
        text = value.strip()
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(
                f'invalid duration {value!r}; use e.g. "90s", "5m", "1h30m", "250ms" or integer milliseconds'
            )
        units = [u for _, u in parts]
        if units != sorted(set(units), key=_UNIT_ORDER.index):
            raise ValueError(f"invalid duration {value!r}: units must appear once each, largest first")
        exact = sum((Decimal(n) * _UNIT_MS[u] for n, u in parts), Decimal(0))
        if exact != exact.to_integral_value():
            raise ValueError(f"duration {value!r} is not a whole number of milliseconds")
        total = int(exact)
    if total <= 0:
        raise ValueError("a duration must be positive")
    if total > MAX_DURATION_MS:
        raise ValueError(f"a duration must be at most {MAX_DURATION_MS} ms (about 10,000 years)")
    return total


def parse_quantity(value: Any) -> str:
    """A Kubernetes-style resource quantity (``"500m"``, ``"2"``, ``"512Mi"``) as a string.

    Plain YAML numbers are accepted and written as strings.

    Raises:
        ValueError: not a non-negative number with an optional Kubernetes suffix.
    """
    if isinstance(value, bool):
        raise ValueError("expected a quantity such as 1, 0.5, 500m, 512Mi or 2Gi")
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str) or not _QUANTITY.match(value.strip()):
        raise ValueError(f"invalid quantity {value!r}; use e.g. 1, 0.5, 500m, 512Mi or 2Gi")
    if Decimal(_QUANTITY.match(value.strip()).group(1)) == 0:  # type: ignore[union-attr]
        raise ValueError("a resource limit must be greater than zero")
    return value.strip()


def check_domain(name: str) -> str:
    """``name`` lower-cased if it is a valid DNS name (at least one label, no wildcard)."""
    host = name.strip().lower().rstrip(".")
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{name!r} is not a valid domain name")
    return host


def normalise_destination(value: str) -> str:
    """An exact domain, a ``*.suffix`` wildcard, an IP address or a CIDR, normalised.

    A bare IP becomes a single-address CIDR (``10.0.0.5`` → ``10.0.0.5/32``).

    Raises:
        ValueError: any other form, a lone ``*``, a wildcard not in the leftmost label, or
            a CIDR with host bits set.
    """
    text = value.strip()
    if text.startswith("*."):
        return "*." + check_domain(text[2:])
    if "*" in text:
        raise ValueError(
            f"invalid destination {value!r}: a wildcard is only allowed as the leftmost label (*.example.com)"
        )
    if "/" in text or _looks_like_ip(text):
        try:
            net = ipaddress.ip_network(text.strip("[]"), strict=True)
        except ValueError as e:
            raise ValueError(f"invalid CIDR {value!r}: {e}") from None
        return str(net)
    return check_domain(text)


def _looks_like_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def check_env_name(value: str) -> str:
    """``value`` if it is an environment variable name.

    Raises:
        ValueError: it is not (for instance because it is a secret value pasted in).
    """
    if not _ENV_NAME.match(value) or looks_like_secret_value(value):
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits, underscore), not its value"
        )
    return value


def looks_like_secret_value(text: str) -> bool:
    """Whether ``text`` looks like a pasted API key or token rather than a name."""
    lowered = text.lower()
    if lowered.startswith(_SECRET_PREFIXES):
        return True
    # Long runs mixing lower case, upper case and digits are keys, not names.
    return (
        len(text) >= 24
        and bool(re.search(r"[a-z]", text))
        and bool(re.search(r"[A-Z]", text))
        and bool(re.search(r"\d", text))
    )
