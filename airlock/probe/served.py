"""The probe with a controller of its own, for the length of one ``helm test``.

The chart's production controller carries no probe agent: a standing agent that runs its job
text as a shell command would be a path into the cluster for anyone holding the jobs-API
token. Instead the test pod loads a configuration holding only the probe agents (a hook
ConfigMap), serves it in this process on loopback with a token generated here and never
written out, submits the probe's jobs to it, and stops it (its sandboxes are removed on the
way out) before the pod exits.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import replace
from pathlib import Path

from airlock.config import load_config
from airlock.controller import Controller, ControllerOptions, ServiceSettings
from airlock.errors import ConfigError

from .client import ProbeError, ProbeOptions, Row, run_probe

__all__ = ["run_served_probe"]


async def run_served_probe(opts: ProbeOptions, config_path: Path) -> list[Row]:
    """Serve ``config_path``'s agents in this process, run the probe against them, stop.

    ``opts.controller`` and ``opts.token`` are ignored (the served controller's are used); its
    port at ``opts.self_ip`` joins the targets no sandbox may reach.

    Raises:
        ProbeError: the configuration does not load (exit 2), or what :func:`run_probe` raises.
    """
    try:
        config = load_config(config_path)
    except (ConfigError, OSError) as e:
        raise ProbeError(f"the probe's configuration {config_path} does not load: {e}", 2) from e
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="airlock-probe-") as data_dir:
        options = ControllerOptions(
            data_dir=Path(data_dir),
            address="127.0.0.1:0",
            token=token,
            settings=ServiceSettings(concurrency=2, max_follow_ups=0, max_depth=0),
        )
        async with Controller(config, options) as controller:
            port = controller.address.rpartition(":")[2]
            host = f"[{opts.self_ip}]" if ":" in opts.self_ip else opts.self_ip
            # It listens on loopback only: no sandbox may reach it at this pod's address either.
            targets = {**opts.targets, "probe's own controller": f"{host}:{port}"}
            served = replace(opts, controller=controller.address, token=token, targets=targets)
            return await run_probe(served)
