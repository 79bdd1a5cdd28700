#!/usr/bin/env bash
# The planner's time slack, A/B on one ResNet-50 inference: `infer --net
# resnet50-imagenet --limit 1` on 2 threads with `--time-slack 0.15` ("before", the
# default until 2026-12-03) and `--time-slack 0` ("after", the default since),
# alternating, `runs` times each (default 2), one binary, the per-op costs measured on
# this machine first (`bench ops --save` into a scratch cache, as bench/resnet50.sh
# does). Raw JSON goes to bench/results/ab-time-slack/{before,after}-<run>.json (or
# $AB_OUT); bench/ab_table.py prints the table.
#
#   bash bench/ab_time_slack.sh [runs]
source "$(dirname "$0")/lib.sh"
runs=${1:-2}
out=${AB_OUT:-bench/results/ab-time-slack}
mkdir -p "$out"
HELINA_CACHE_DIR="$(mktemp -d)"
export HELINA_CACHE_DIR
trap 'rm -rf "$HELINA_CACHE_DIR"' EXIT
"$bin" --threads 2 bench ops --params n8192-p28 --save >/dev/null
for run in $(seq 1 "$runs"); do
  for side in before after; do
    slack=0
    [ "$side" = before ] && slack=0.15
    "$bin" --threads 2 infer --net resnet50-imagenet --limit 1 --json --time-slack "$slack" \
      >"$out/$side-$run.json"
  done
done
python3 bench/ab_table.py "$out" "$runs"
