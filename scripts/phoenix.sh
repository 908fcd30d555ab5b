#!/usr/bin/env bash
# Starts a real Arize Phoenix (an OTLP trace backend) on free loopback ports with a fresh
# working directory, for the backend test. Source it: it exports PHOENIX_URL and PHOENIX_PID
# and stops Phoenix by its PID on exit (through PI_CLEANUP, shared with scripts/prometheus.sh).
#
#   . scripts/phoenix.sh
#
# The venv (arize-phoenix from PyPI, ~850 MB, ~1-2 min) is kept in .venv/phoenix and reused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PHOENIX_VENV:-$root/.venv/phoenix}"
if [ ! -x "$venv/bin/phoenix" ]; then
  echo "== installing arize-phoenix into $venv"
  # A Python without ensurepip (Debian's, without python3-venv) still makes a bare venv; the
  # host's pip then installs into it.
  if python3 -m venv "$venv"; then
    pip=("$venv/bin/pip")
  else
    echo "== no ensurepip here: a venv without pip, filled by the host's pip ($(df -h . | tail -n 1))"
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv"
    pip=(python3 -m pip --python "$venv/bin/python3")
  fi
  "${pip[@]}" install --quiet --disable-pip-version-check "arize-phoenix>=12,<30"
fi
read -r phoenix_port phoenix_grpc_port < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)
phoenix_dir="$(mktemp -d)"
PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$phoenix_port" PHOENIX_GRPC_PORT="$phoenix_grpc_port" \
  PHOENIX_WORKING_DIR="$phoenix_dir" PHOENIX_TELEMETRY_ENABLED=false PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
  "$venv/bin/phoenix" serve > "$phoenix_dir/phoenix.log" 2>&1 &
export PHOENIX_PID=$!
export PHOENIX_URL="http://127.0.0.1:$phoenix_port"
PI_CLEANUP="kill $PHOENIX_PID 2>/dev/null || true; wait $PHOENIX_PID 2>/dev/null || true; rm -rf '$phoenix_dir'; ${PI_CLEANUP:-}"
trap 'eval "$PI_CLEANUP"' EXIT
"$root/scripts/wait-ready" Phoenix "$PHOENIX_URL/healthz" "$PHOENIX_PID" "$phoenix_dir/phoenix.log" 120
echo "== Phoenix ready at $PHOENIX_URL (pid $PHOENIX_PID)"
