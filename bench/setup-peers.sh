#!/usr/bin/env bash
# The peers for `python -m bench`, installed for the benchmark only (never airlock's dependencies):
#  - bench/.venv-peers: a virtualenv with llm-sandbox and SWE-ReX (pinned below);
#  - airlock-bench-peers:<runner tag>: the runner image with SWE-ReX's server preinstalled
#    (wheels fetched with pip, installed offline into the image's /opt/venv), its entrypoint
#    cleared so either peer can start it. Rebuilt when the runner image changes.
# Needs PyPI through pip, Docker and the runner image (`airlock images build`). Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
LLM_SANDBOX="llm-sandbox[docker]==0.3.46"
SWE_REX="swe-rex==1.4.0"
VENV=bench/.venv-peers

if [ -z "${RUNNER_IMAGE:-}" ]; then
  RUNNER_IMAGE="$(.venv/bin/python -c 'from airlock.images import runner_image_tag; print(runner_image_tag())')"
fi
PEER_IMAGE="airlock-bench-peers:${RUNNER_IMAGE##*:}"

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# SWE-ReX's client imports aiohttp without declaring it.
"$VENV/bin/pip" install -q "$LLM_SANDBOX" "$SWE_REX" aiohttp
echo "peers installed in $VENV: $("$VENV/bin/pip" list 2>/dev/null | grep -Ei '^(llm-sandbox|swe-rex) ' | tr -s ' ' | paste -sd, -)"

base="$(docker image inspect -f '{{.Id}}' "$RUNNER_IMAGE")"
have="$(docker image inspect -f '{{index .Config.Labels "airlock.bench.base"}} {{index .Config.Labels "airlock.bench.swe-rex"}}' "$PEER_IMAGE" 2>/dev/null || true)"
if [ "$have" = "$base $SWE_REX" ]; then
  echo "$PEER_IMAGE is up to date"
  exit 0
fi

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
pyver="$(docker run --rm --network none --entrypoint /opt/venv/bin/python "$RUNNER_IMAGE" \
  -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
arch="$(uname -m)"
"$VENV/bin/pip" download -q "$SWE_REX" -d "$build/wheels" --only-binary=:all: \
  --python-version "$pyver" --implementation cp \
  --platform "manylinux_2_36_$arch" --platform "manylinux2014_$arch" --platform "linux_$arch"
cat >"$build/Dockerfile" <<EOF
FROM $RUNNER_IMAGE
USER 0:0
COPY wheels/ /tmp/wheels/
RUN /opt/venv/bin/python -m pip install -q --no-index --no-cache-dir --find-links /tmp/wheels "$SWE_REX" \\
 && rm -rf /tmp/wheels && /opt/venv/bin/swerex-remote --help >/dev/null
USER 65534:65534
ENTRYPOINT []
CMD ["sleep", "infinity"]
LABEL airlock.bench.base="$base" airlock.bench.swe-rex="$SWE_REX"
EOF
if ! docker build -q -t "$PEER_IMAGE" "$build" >"$build/log" 2>&1; then
  cat "$build/log" >&2
  exit 1
fi
echo "built $PEER_IMAGE (from $RUNNER_IMAGE, with $SWE_REX)"
