#!/usr/bin/env bash
# Whole networks end to end (`helina infer`: both parties in one process over loopback
# TCP, 2 threads), on the committed fixtures and a built-in network: time and bytes per
# inference (online and offline), setup, agreement with float, the fixed-point check,
# peak RSS. Each model runs 3 times; raw JSON goes to bench/results/network-*.json and
# the table of BENCHMARKS.md is printed from it (bench/networks_table.py, medians).
source "$(dirname "$0")/lib.sh"
fixture() { # name inputs run
  "$bin" --threads 2 infer --json --model "fixtures/$1.onnx" \
    --calibration "fixtures/$1-calibration.npy" --input "fixtures/$1-test.npy" \
    --limit "$2" >"$out/network-$1-$3.json"
}
builtin() { # name inputs run
  "$bin" --threads 2 infer --json --net "$1" --limit "$2" >"$out/network-$1-$3.json"
}
for run in 1 2 3; do
  fixture digits-cnn-bn 16 "$run"
  fixture residual-cifar 8 "$run"
  fixture mobilenet-block 4 "$run"
  builtin minionn-cifar 2 "$run"
done
python3 bench/networks_table.py "$out"/network-{digits-cnn-bn,residual-cifar,mobilenet-block,minionn-cifar}-[123].json
