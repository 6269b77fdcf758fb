"""TLS on the controller's API: :class:`ServerTls` (certificate, key, optional client CA for
mutual TLS) and :func:`bind_port`, which listens with it, or in plaintext with a warning when
the address is reachable from other machines.

The files are re-read whenever one of their modification times changes (checked at each new
connection's handshake), so a rotated certificate (a cert-manager Secret mounted into the pod)
takes effect without a restart; a rotation caught half-written keeps the previous pair.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc

from airlock.jobs import TlsFileError, is_local_address, read_pem

_log = logging.getLogger("airlock.controller")


@dataclass(frozen=True)
class ServerTls:
    """The controller's TLS files (PEM).

    Attributes:
        cert: the server certificate chain.
        key: its private key.
        client_ca: the CA(s) client certificates must chain to; set: mutual TLS (a client
            without a certificate is refused at the handshake).
    """

    cert: Path
    key: Path
    client_ca: Path | None = None

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        """The certificate configuration the files hold now.

        Raises:
            TlsFileError: a file is missing, unreadable or not PEM.
        """
        cert = read_pem(self.cert, "TLS certificate")
        key = read_pem(self.key, "TLS key")
        if b"PRIVATE KEY-----" not in key:
            raise TlsFileError(f"the TLS key {self.key} holds no PEM private key")
        ca = read_pem(self.client_ca, "TLS client CA") if self.client_ca is not None else None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def credentials(self) -> grpc.ServerCredentials:
        """Server credentials that follow the files as they change (read now once).

        Raises:
            TlsFileError: a file is missing, unreadable or not PEM.
        """
        follower = _Follower(self)
        return grpc.dynamic_ssl_server_credentials(
            follower.initial, follower.fetch, require_client_authentication=self.client_ca is not None
        )

    def paths(self) -> tuple[Path, ...]:
        """The files, in the order they are read."""
        return (self.cert, self.key) if self.client_ca is None else (self.cert, self.key, self.client_ca)


class _Follower:
    """Hands gRPC a new configuration when a file's modification time changed (called from
    gRPC's own threads at each handshake: a few ``stat`` calls, no read unless changed)."""

    def __init__(self, tls: ServerTls) -> None:
        self.tls = tls
        self._lock = threading.Lock()
        self._seen = self._stamps()
        self.initial = tls.configuration()

    def _stamps(self) -> tuple[int, ...]:
        found = []
        for path in self.tls.paths():
            try:
                found.append(path.stat().st_mtime_ns)
            except OSError:
                found.append(-1)
        return tuple(found)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        with self._lock:
            stamps = self._stamps()
            if stamps == self._seen:
                return None
            try:
                configuration = self.tls.configuration()
            except TlsFileError as e:
                _log.warning("the TLS files changed but cannot be read (%s); keeping the previous ones", e)
                return None
            self._seen = stamps
            _log.info("TLS certificate reloaded from %s", self.tls.cert)
            return configuration


def warn_if_plaintext(listen: str) -> None:
    """A WARNING when the API is served without TLS where other machines can reach it."""
    if is_local_address(listen):
        return
    _log.warning(
        "the controller API on %s is served WITHOUT TLS: requests, results and the bearer token "
        "cross the network in clear. Serve it with --tls-cert/--tls-key (and --tls-client-ca for "
        "mutual TLS), or set controller.tls in the Helm chart",
        listen,
    )


def bind_port(server: grpc.aio.Server, listen: str, tls: ServerTls | None) -> int:
    """Add ``listen`` to ``server``, with TLS when given (else plaintext, with a warning when it
    is not loopback or a Unix socket); the port bound (0: none).

    Raises:
        TlsFileError: a TLS file is missing, unreadable or not PEM.
    """
    if tls is None:
        warn_if_plaintext(listen)
        return int(server.add_insecure_port(listen))
    return int(server.add_secure_port(listen, tls.credentials()))
