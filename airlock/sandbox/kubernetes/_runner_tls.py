"""The controller→runner channel's TLS on Kubernetes: one certificate per sandbox, pinned.

At provisioning the controller makes a fresh self-signed certificate and key (ECDSA P-256,
valid for :data:`VALIDITY`, for the one name :data:`RUNNER_NAME`), puts both in the sandbox's
own Secret, and the runner serves with them (``--tls-cert/--tls-key``). The controller trusts
exactly that certificate for that sandbox (``root_certificates`` is the certificate itself,
checked for :data:`RUNNER_NAME`): no CA, so no other sandbox's runner, and nothing else on
the pod network, can answer in its place; the bearer token never crosses in clear.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

__all__ = ["RUNNER_NAME", "VALIDITY", "RunnerCertificate"]

#: The name every runner certificate is issued for and checked against (``.invalid``: never
#: resolvable, so it can name nothing but a pinned runner).
RUNNER_NAME = "runner.airlock.invalid"
#: How long a runner certificate is valid: a sandbox (even a warm pool member waiting for its
#: job, then a long job) lives less; one that outlives it cannot be reached any more.
VALIDITY = datetime.timedelta(days=7)
#: How far back a certificate's validity starts (clocks of the controller and node may differ).
_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True, repr=False)
class RunnerCertificate:
    """A runner's certificate and private key (PEM); the key is never shown in ``repr``."""

    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:
        return "RunnerCertificate(...)"

    @classmethod
    def generate(cls, validity: datetime.timedelta = VALIDITY) -> RunnerCertificate:
        """A fresh self-signed ECDSA P-256 certificate for :data:`RUNNER_NAME` and its key."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, RUNNER_NAME)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _SKEW)
            .not_valid_after(now + validity)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(RUNNER_NAME)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=key_pem)
