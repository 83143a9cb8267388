#!/usr/bin/env bash
# Checks the Prometheus rules (dashboards/stragglar-rules.yml) and runs their promtool unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null; then
  echo "check-rules: promtool not found; run scripts/install-deps.sh (Debian package prometheus)" >&2
  exit 1
fi
promtool check rules dashboards/stragglar-rules.yml
promtool test rules dashboards/stragglar-rules.test.yml
