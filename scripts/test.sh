#!/usr/bin/env bash
# Set up (venv, runner image) and run the whole test suite, Docker sandboxes and
# the real offline model included. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
.venv/bin/airlock images build
# The tests' PostgreSQL 15 (postgres_server / postgres_dsn fixtures), offline from Debian's package;
# a no-op when current.
.venv/bin/python -m tests.support.postgres_image
# The Node contract client's packages, exactly as locked (its test skips without node/npm).
if command -v npm >/dev/null 2>&1 && { [ ! -d tests/node/node_modules ] || [ tests/node/package-lock.json -nt tests/node/node_modules ]; }; then
  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
fi
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing (exit 5 must not pass silently)" >&2
  exit 1
fi
exit "$rc"
