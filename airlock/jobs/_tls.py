"""TLS on the jobs API, the client's side: when a channel uses TLS and what it trusts.

A client uses TLS when it is given a CA (``tls_ca`` or ``$AIRLOCK_TLS_CA``), a client
certificate, or ``tls=True``, and by default whenever the address is not loopback or a Unix
socket: then the controller's certificate is verified against the system roots (never
unverified). ``tls=False`` (``AIRLOCK_TLS=0``) allows plaintext to a remote address, with a
warning. :func:`is_local_address` is also what the server asks before warning about plaintext.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from airlock.errors import AirlockError

#: A PEM file of the CA(s) the controller's certificate is checked against.
TLS_CA_ENV = "AIRLOCK_TLS_CA"
#: ``0``/``false``: plaintext even to a remote address; ``1``/``true``: TLS even on loopback.
TLS_ENV = "AIRLOCK_TLS"
#: The client certificate (PEM) and its key, for a controller that asks for one (mutual TLS).
TLS_CERT_ENV = "AIRLOCK_TLS_CERT"
TLS_KEY_ENV = "AIRLOCK_TLS_KEY"
#: The name the controller's certificate is checked for, when not the address's host (e.g.
#: the Service's name through a port-forward to 127.0.0.1).
TLS_SERVER_NAME_ENV = "AIRLOCK_TLS_SERVER_NAME"

_log = logging.getLogger("airlock.jobs")
_NO = frozenset({"0", "false", "no", "off"})
_YES = frozenset({"1", "true", "yes", "on"})


class TlsFileError(AirlockError):
    """A TLS file (certificate, key or CA) is missing, unreadable or not PEM."""


def read_pem(path: Path, what: str) -> bytes:
    """The PEM content of ``path`` (``what``: how errors name it, e.g. "TLS certificate").

    Raises:
        TlsFileError: missing, unreadable, or holds no PEM block.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TlsFileError(f"cannot read the {what} {path}: {e.strerror or e}") from e
    if b"-----BEGIN " not in data:
        raise TlsFileError(f"the {what} {path} is not PEM (no -----BEGIN line)")
    return data


def is_local_address(address: str) -> bool:
    """Whether ``address`` stays on this machine: a Unix socket, ``localhost``, 127.0.0.0/8 or
    ``::1`` (``host:port``, ``[v6]:port``, ``dns:``/``ipv4:``/``ipv6:`` forms)."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if address.startswith(scheme):
            address = address[len(scheme) :]
            break
    if address.startswith("["):
        host = address[1:].split("]", 1)[0]
    else:
        host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, repr=False)
class ClientTls:
    """What a TLS channel trusts and presents (the key is never shown in ``repr``).

    Attributes:
        root_certificates: PEM CA(s); None: the system roots.
        certificate_chain: the client certificate (mutual TLS), or None.
        private_key: its key.
        server_name: the name the certificate is checked for, when not the address's host.
    """

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def __repr__(self) -> str:
        ca = "given CA" if self.root_certificates is not None else "system roots"
        return f"ClientTls({ca}, client_cert={self.certificate_chain is not None})"

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def _flag(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _NO:
        return False
    if lowered in _YES:
        return True
    raise TlsFileError(f"{TLS_ENV}={value!r}: use 1 (TLS) or 0 (plaintext)")


def _pem_of(value: Path | str | bytes | None, what: str) -> bytes | None:
    """PEM given as bytes, or read from a path (a ``str`` from the environment)."""
    if value is None or isinstance(value, bytes):
        return value
    return read_pem(Path(value), what)


def client_tls(
    address: str,
    *,
    tls_ca: Path | bytes | None = None,
    tls: bool | None = None,
    server_name: str | None = None,
    client_cert: Path | bytes | None = None,
    client_key: Path | bytes | None = None,
    environ: Mapping[str, str] = os.environ,
) -> ClientTls | None:
    """How a client reaches ``address``: None for plaintext, else what TLS trusts and presents.

    Unset arguments come from ``$AIRLOCK_TLS_CA``, ``$AIRLOCK_TLS``, ``$AIRLOCK_TLS_CERT``,
    ``$AIRLOCK_TLS_KEY`` and ``$AIRLOCK_TLS_SERVER_NAME``.

    Raises:
        TlsFileError: a file is missing or not PEM, a certificate without its key (or the
            reverse), or a bad ``$AIRLOCK_TLS``.
    """
    if tls is None and environ.get(TLS_ENV, "").strip():
        tls = _flag(environ[TLS_ENV])
    if tls is False:
        if not is_local_address(address):
            _log.warning(
                "plaintext to %s (TLS turned off): requests and the bearer token cross the network in "
                "clear; give the controller's CA with --tls-ca or %s instead",
                address,
                TLS_CA_ENV,
            )
        return None
    ca = tls_ca if tls_ca is not None else (environ.get(TLS_CA_ENV) or None)
    cert = client_cert if client_cert is not None else (environ.get(TLS_CERT_ENV) or None)
    key = client_key if client_key is not None else (environ.get(TLS_KEY_ENV) or None)
    if (cert is None) != (key is None):
        raise TlsFileError("a client certificate and its key go together (--tls-cert and --tls-key)")
    if not (tls or ca is not None or cert is not None or not is_local_address(address)):
        return None
    return ClientTls(
        root_certificates=_pem_of(ca, "TLS CA file"),
        certificate_chain=_pem_of(cert, "TLS client certificate"),
        private_key=_pem_of(key, "TLS client key"),
        server_name=server_name or environ.get(TLS_SERVER_NAME_ENV) or None,
    )


def open_channel(address: str, options: list[tuple[str, Any]], tls: ClientTls | None) -> grpc.aio.Channel:
    """A plaintext channel (``tls`` None) or a TLS one."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    if tls.server_name:
        options = [*options, ("grpc.ssl_target_name_override", tls.server_name)]
    return grpc.aio.secure_channel(address, tls.credentials(), options=options)


def tls_hint(details: str) -> str | None:
    """What to do about a failed call whose ``details`` tell of a TLS handshake failure."""
    lowered = details.lower()
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
        return (
            f"the controller's certificate is not trusted; pass --tls-ca (or set {TLS_CA_ENV}) to the "
            "CA that signed it"
        )
    if "handshake" in lowered or "ssl" in lowered or "tls" in lowered:
        return (
            "the TLS handshake failed: both sides must use TLS (serve with --tls-cert/--tls-key, or "
            f"{TLS_ENV}=0 for a plaintext controller), and a controller asking for a client "
            f"certificate needs --tls-cert/--tls-key ({TLS_CERT_ENV}/{TLS_KEY_ENV})"
        )
    if "socket closed" in lowered:  # what a plaintext client sees of a TLS server
        return (
            "the controller closed the connection: if it serves TLS, pass --tls-ca (or set "
            f"{TLS_CA_ENV}); else check that it is `airlock serve`"
        )
    return None
