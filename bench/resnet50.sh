#!/usr/bin/env bash
# ResNet-50 (ImageNet shapes, seeded public weights, a random input) on 2 threads:
# every linear layer under HE (`bench network --backend bfv --linear-only`, shares
# checked against the plaintext reference), then one whole inference end to end
# (`infer --net resnet50-imagenet`: linear layers, ReLU, MaxPool and truncation on
# silent OT, the result checked against the fixed-point reference and float), RUNS times
# (default 3: the machine's speed moves from minute to minute, so the table reports the
# median run and every run's total), each followed by the planner's projection of the same
# inference (`bench network --backend count --as-served`). Raw JSON goes to
# bench/results/resnet50-*.json; bench/resnet50_table.py prints the table of
# BENCHMARKS.md beside HELiKs's published figures, and the median projection against the
# median run.
source "$(dirname "$0")/lib.sh"
# The planner's per-op costs measured on this machine now (`bench ops --save`, into a
# scratch cache that only this script's runs read), for the 20-bit p of the linear-only
# run and the 28-bit p the planner picks for ResNet-50: plans and projections then price
# this machine as it runs today instead of the reference figures.
HELINA_CACHE_DIR="$(mktemp -d)"
export HELINA_CACHE_DIR
trap 'rm -rf "$HELINA_CACHE_DIR"' EXIT
for params in n8192 n8192-p28; do
  "$bin" --threads 2 bench ops --params "$params" --save >/dev/null
done
# sessions of one input, as `infer --limit 1` plans them (the flooding sized for it)
"$bin" --threads 2 bench network --net resnet50-imagenet --backend bfv --linear-only \
  --session-inputs 1 --json >"$out/resnet50-linear.json"
# the default budget for held weights: a third of the free memory, at most 2 GiB. Each
# inference is followed by the planner's projection of that same inference (count
# backend, the served program), so that the two see the same stretch of the machine
runs="${RUNS:-3}"
rm -f "$out"/resnet50-infer*.json "$out"/resnet50-projected*.json
for r in $(seq 1 "$runs"); do
  "$bin" --threads 2 infer --net resnet50-imagenet --limit 1 --json \
    >"$out/resnet50-infer-$r.json"
  "$bin" --threads 2 bench network --net resnet50-imagenet --backend count --as-served \
    --session-inputs 1 --json >"$out/resnet50-projected-$r.json"
done
files=()
for r in $(seq 1 "$runs"); do
  files+=("$out/resnet50-infer-$r.json" "$out/resnet50-projected-$r.json")
done
python3 bench/resnet50_table.py "$out/resnet50-linear.json" "${files[@]}"
