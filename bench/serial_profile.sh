#!/usr/bin/env bash
# Where one of the two cores idles in a one-process ResNet-50 inference: samples both
# cores (`perf record -a`, 299 Hz, DWARF call graphs) for WINDOW seconds (default 14)
# starting SKIP seconds (default 32, past planning and setup) into
# `helina --threads 2 infer --net resnet50-imagenet --limit 1 --json`, then
# bench/serial_profile.py counts the samples taken while the other core was idle, by the
# crate functions on the stack. Needs `perf` and root (or perf_event_paranoid ≤ 0).
#
#   bash bench/serial_profile.sh BINARY [SKIP] [WINDOW]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "$1")
skip=${2:-32}
window=${3:-14}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" --threads 2 infer --net resnet50-imagenet --limit 1 --json >"$tmp/infer.json" &
pid=$!
sleep "$skip"
perf record -a -F 299 --call-graph dwarf,8192 -o "$tmp/perf.data" -- sleep "$window" 2>/dev/null
wait "$pid"
perf script -i "$tmp/perf.data" -F comm,tid,cpu,time,ip,sym --no-inline 2>/dev/null >"$tmp/perf.txt"
python3 bench/serial_profile.py "$tmp/perf.txt"
