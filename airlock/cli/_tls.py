"""The client side's TLS options, on the ``airlock`` command itself so that every client verb
(``submit``, ``jobs …``, ``approve``, ``status``, …) has them: ``airlock --tls-ca ca.pem jobs ls``.

Each option sets its environment variable for this process (``$AIRLOCK_TLS_CA``,
``$AIRLOCK_TLS_CERT``, ``$AIRLOCK_TLS_KEY``), which :class:`~airlock.jobs.ControllerClient`
reads; the variables alone work as well.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

#: The environment variables (as in ``airlock.jobs``; spelled here so that building the app
#: does not load the gRPC client).
TLS_CA_ENV = "AIRLOCK_TLS_CA"
TLS_CERT_ENV = "AIRLOCK_TLS_CERT"
TLS_KEY_ENV = "AIRLOCK_TLS_KEY"


def client_tls_options(
    tls_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-ca",
            envvar=TLS_CA_ENV,
            help="Client verbs: the CA (PEM) the controller's certificate is checked against; turns "
            "TLS on. Without it, TLS is used to any address but loopback or a Unix socket, checked "
            "against the system roots (AIRLOCK_TLS=0 allows plaintext there).",
            show_default=False,
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            envvar=TLS_CERT_ENV,
            help="Client verbs: a client certificate (PEM) for a controller that asks for one "
            "(mutual TLS); needs --tls-key.",
            show_default=False,
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key", envvar=TLS_KEY_ENV, help="The client certificate's key (PEM).", show_default=False
        ),
    ] = None,
) -> None:
    """Run agents in sandboxes, or serve and use the jobs API."""
    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together", param_hint="--tls-cert/--tls-key")
    for name, value in ((TLS_CA_ENV, tls_ca), (TLS_CERT_ENV, tls_cert), (TLS_KEY_ENV, tls_key)):
        if value is not None:
            os.environ[name] = str(value)
