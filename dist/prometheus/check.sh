#!/usr/bin/env bash
# Checks braid's Prometheus alert rules and runs their unit tests with promtool
# (Debian's prometheus package; .ci/run installs it). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v promtool >/dev/null; then
	# CI must run them; elsewhere say so and go on.
	[ "${CI:-}" = true ] && { echo "dist/prometheus/check.sh: promtool is not installed"; exit 1; }
	echo "dist/prometheus/check.sh: promtool not installed (apt-get install prometheus): rules not checked"
	exit 0
fi
promtool check rules braid-rules.yml
promtool test rules braid-rules.test.yml
