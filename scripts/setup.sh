#!/usr/bin/env bash
# Idempotent set-up shared by scripts/demo.sh and scripts/test.sh:
# a virtualenv with airlock and its dev tools, and a check that Docker answers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.airlock-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  # The s3:// blob store's client, without its dependencies: botocore pins python-dateutil
  # below 3, which kubernetes 37 (in the dev extra) refuses; botocore works with the newer one.
  .venv/bin/pip install -q --no-deps 'boto3>=1.34' 'botocore>=1.34' 's3transfer>=0.10' 'jmespath>=1'
  touch "$stamp"
fi
# A local S3-compatible server for the blob store's tests (moto's server mode), in a virtualenv
# of its own for the same pin.
if [ ! -f .venv-moto/.airlock-installed ]; then
  "$PY" -m venv .venv-moto
  .venv-moto/bin/pip install -q 'moto[server]>=5'
  touch .venv-moto/.airlock-installed
fi
if ! docker info >/dev/null 2>&1; then
  echo "Docker engine not reachable: install it (Debian: apt-get install -y docker.io) and start dockerd." >&2
  echo "Sandbox tests and the demo need it." >&2
  exit 3
fi
