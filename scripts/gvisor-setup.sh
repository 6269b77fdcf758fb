#!/usr/bin/env bash
# Make `isolation: gvisor` available to the Docker backend (Debian, as root): install gVisor
# (runsc), register its two runtimes in /etc/docker/daemon.json (merged into what is there),
# and restart dockerd if it runs without them. Idempotent. `airlock doctor` checks the result.
#
#   runsc          --network=none --host-uds=create   sandboxes without network
#   runsc-hostnet  --network=host --host-uds=create   sandboxes on their internal network
#
# (gVisor's own netstack does not start in these containers; with --network=host it uses the
# container's network namespace. --host-uds=create lets the runner's control socket, in the
# bind-mounted /run/airlock, be reached from the host.)
set -euo pipefail
DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
RUNTIMES='{"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=create"]}, "runsc-hostnet": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host", "--host-uds=create"]}}'

if ! command -v runsc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq runsc >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq runsc >/dev/null; }
fi
echo "gVisor: $(runsc --version | head -1)"

mkdir -p "$(dirname "$DAEMON_JSON")"
python3 - "$DAEMON_JSON" "$RUNTIMES" <<'PY'
import json, pathlib, sys
path, runtimes = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
config = json.loads(path.read_text() or "{}") if path.exists() else {}
config.setdefault("runtimes", {}).update(runtimes)
path.write_text(json.dumps(config, indent=2) + "\n")
PY

if docker info >/dev/null 2>&1; then
  if docker info --format '{{json .Runtimes}}' | grep -q '"runsc-hostnet"'; then
    exit 0
  fi
  echo "restarting dockerd to load the gVisor runtimes"
  pkill -x dockerd || true
  for _ in $(seq 1 30); do pgrep -x dockerd >/dev/null || break; sleep 1; done
  (dockerd >/tmp/dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info --format '{{json .Runtimes}}' | grep -q '"runsc-hostnet"' || {
    echo "dockerd did not come back with the gVisor runtimes"; tail -20 /tmp/dockerd.log; exit 1; }
fi
