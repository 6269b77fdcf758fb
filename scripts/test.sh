#!/usr/bin/env bash
# Set up (venv, runner image) and run the whole test suite, Docker sandboxes and
# the real offline model included. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
.venv/bin/airlock images build
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing (exit 5 must not pass silently)" >&2
  exit 1
fi
exit "$rc"
