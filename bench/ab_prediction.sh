#!/usr/bin/env bash
# Two helina binaries back to back on how well the planner predicts ResNet-50's linear
# layers, alternating so that both see the same machine state. Each run of a binary
# measures the planner's per-op costs into its own fresh cache (`bench ops --params
# n8192-p28 --save`), then runs the first 16 linear layers under HE for real with every
# weight encoded per query (`bench network --net resnet50-imagenet --backend bfv
# --linear-only --layers 16 --mem-limit 0 --session-inputs 1 --reps 3`), beside the
# prediction from those costs. Raw JSON goes to bench/results/ab-prediction/
# {before,after}-<run>.json (and each run's cost cache to -costs.json); the table gives
# per run the layers whose predicted time is within 20% of the measured one, the median
# error, and the cost figures that price weights encoded per query.
#
#   bash bench/ab_prediction.sh BEFORE_BINARY AFTER_BINARY [runs]
source "$(dirname "$0")/ab_lib.sh"
ab_args 3 bench/results/ab-prediction "$@"
# each run prices the machine with its own binary's measurement, from an empty cache
ab_prepare() {
  rm -rf "${HELINA_CACHE_DIR:?}"/*
  "$1" --threads 2 bench ops --params n8192-p28 --save >/dev/null
  cp "$HELINA_CACHE_DIR"/costs-n8192-p28-*.json "$out/$2-$3-costs.json"
}
ab_alternate bench network --net resnet50-imagenet --backend bfv --linear-only \
  --params n8192-p28 --session-inputs 1 --layers 16 --reps 3 --mem-limit 0 --json
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
print("| binary | run | layers | within 20% | median error | range | encode in product, level 2, µs | stride ratio a = 3 / a = 5 |")
print("|---|---|---|---|---|---|---|---|")
for run in range(1, runs + 1):
    for side in ("before", "after"):
        r = json.load(open(f"{out}/{side}-{run}.json"))
        c = json.load(open(f"{out}/{side}-{run}-costs.json"))
        e = [row["predicted_ms"] / row["ms"] - 1 for row in r["rows"]
             if row.get("pick") and row["kind"] in ("conv", "matvec")]
        ratio = c["coeffs_stride_ratio"]
        print(f"| {side} | {run} | {len(e)} | {sum(abs(x) <= 0.2 for x in e)} "
              f"| {statistics.median(e) * 100:+.0f}% | {min(e) * 100:+.0f}% to {max(e) * 100:+.0f}% "
              f"| {c['encode_in_product_coeffs_us'][2]:.0f} | {ratio[3]:.2f} / {ratio[5]:.2f} |")
PY
