"""The isolation probe: jobs that try what their sandboxes must not be able to do.

:mod:`airlock.probe.sandbox` runs inside a sandbox (stdlib only); the rest runs in the Helm
chart's test pod (``airlock probe``): it serves the destinations, submits the jobs through the
controller's API, and judges what the sandboxes report.
"""

from ._run import LISTEN_PORT, ProbeError, ProbeOptions, read_secret_file, run_probe
from ._servers import ProbeServers
from ._verdict import Row, render_rows, report_of

__all__ = [
    "LISTEN_PORT",
    "ProbeError",
    "ProbeOptions",
    "ProbeServers",
    "Row",
    "read_secret_file",
    "render_rows",
    "report_of",
    "run_probe",
]
