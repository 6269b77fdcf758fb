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
  # boto3 (the S3 blob store) without its dependencies: botocore requires python-dateutil<3,
  # kubernetes>=37 requires >=3; boto3 works with the dateutil kubernetes brings, so it is
  # installed beside it rather than through the `s3` extra (which pip would refuse to resolve).
  .venv/bin/pip install -q --no-deps 'boto3>=1.34' botocore s3transfer jmespath
  touch "$stamp"
fi
# moto's S3 server (the blob store's tests start it on 127.0.0.1) in a venv of its own: moto
# needs the dateutil<3 the main venv cannot have (see above).
moto_stamp=.venv-moto/.airlock-installed
if [ ! -f "$moto_stamp" ]; then
  [ -x .venv-moto/bin/python ] || "$PY" -m venv .venv-moto
  .venv-moto/bin/pip install -q --upgrade pip
  .venv-moto/bin/pip install -q 'moto[server]>=5'
  touch "$moto_stamp"
fi
if ! docker info >/dev/null 2>&1; then
  echo "Docker engine not reachable: install it (Debian: apt-get install -y docker.io) and start dockerd." >&2
  echo "Sandbox tests and the demo need it." >&2
  exit 3
fi
