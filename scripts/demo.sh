#!/usr/bin/env bash
# The airlock demo, idempotent: set up the venv, build the runner image (a no-op when it is
# current), then run the `demo` agent of examples/airlock.yaml on one question in a fresh
# sandbox. Extra arguments go to `airlock run` (e.g. --json, --max-turns 3, --timeout 2m).
# The `demo` agent uses the offline local model: `airlock run` starts its server on the
# egress gateway (reusing one already there), sends its key through the credential proxy,
# and stops the server afterwards if it started it.
#
#   scripts/demo.sh
#   scripts/demo.sh --json
#   AIRLOCK_DEMO_AGENT=demo-scripted scripts/demo.sh    # the scripted, model-free variant
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
.venv/bin/airlock images build --image runner
# With an Anthropic key the same agent runs on Claude Haiku (key injected by the credential proxy).
default_agent=demo
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then default_agent=demo-claude; fi
exec .venv/bin/airlock run --config examples/airlock.yaml "${AIRLOCK_DEMO_AGENT:-$default_agent}" \
  "What is 17 * 23? Use the calculator." "$@"
