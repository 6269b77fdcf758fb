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
  touch "$stamp"
fi
if ! docker info >/dev/null 2>&1; then
  echo "Docker engine not reachable: install it (Debian: apt-get install -y docker.io) and start dockerd." >&2
  echo "Sandbox tests and the demo need it." >&2
  exit 3
fi
