"""The isolation probe: jobs that try what their sandboxes must not be able to do.

:mod:`airlock.probe.sandbox` runs inside a sandbox (stdlib only); the rest runs in the Helm
chart's test pod (``airlock probe``): it serves the destinations, submits the jobs through the
controller's API, and judges what the sandboxes report (:mod:`airlock.probe.client`).

This package's ``__init__`` imports nothing: the sandbox side must start with the stdlib alone.
"""
