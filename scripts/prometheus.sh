#!/usr/bin/env bash
# Starts a real Prometheus (Debian's package, installed if missing) on a free loopback port with
# a fresh storage folder and its remote-write receiver on, for the dashboard test. Source it: it
# exports PROMETHEUS_URL and PROMETHEUS_PID and stops Prometheus by its PID on exit (through
# PI_CLEANUP, the list of stop commands scripts/phoenix.sh adds to as well).
#
#   . scripts/prometheus.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/apt-need" prometheus:prometheus
prometheus_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
prometheus_dir="$(mktemp -d)"
# No scrape targets: every sample arrives through remote write.
printf 'global:\n  scrape_interval: 1h\n' > "$prometheus_dir/prometheus.yml"
prometheus --config.file="$prometheus_dir/prometheus.yml" --storage.tsdb.path="$prometheus_dir/data" \
  --web.listen-address="127.0.0.1:$prometheus_port" --web.enable-remote-write-receiver \
  > "$prometheus_dir/prometheus.log" 2>&1 &
export PROMETHEUS_PID=$!
export PROMETHEUS_URL="http://127.0.0.1:$prometheus_port"
PI_CLEANUP="kill $PROMETHEUS_PID 2>/dev/null || true; wait $PROMETHEUS_PID 2>/dev/null || true; rm -rf '$prometheus_dir'; ${PI_CLEANUP:-}"
trap 'eval "$PI_CLEANUP"' EXIT
"$root/scripts/wait-ready" Prometheus "$PROMETHEUS_URL/-/ready" "$PROMETHEUS_PID" "$prometheus_dir/prometheus.log" 60
echo "== Prometheus ready at $PROMETHEUS_URL (pid $PROMETHEUS_PID)"
