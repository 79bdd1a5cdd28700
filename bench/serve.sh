#!/usr/bin/env bash
# `helina bench serve` on the committed fixtures (the digit CNN and the CIFAR-sized
# residual block), over plain TCP and over TLS: a server process and 4 concurrent
# clients, round after round. Raw JSON goes to bench/results/serve-*.json, and the
# table of BENCHMARKS.md is printed from it (bench/serve_table.py).
source "$(dirname "$0")/lib.sh"
run() { # name model inputs-per-client rounds [--tls]
  local name=$1 model=$2 inputs=$3 rounds=$4
  shift 4
  "$bin" bench serve --model "fixtures/$model.onnx" \
    --calibration "fixtures/$model-calibration.npy" --input "fixtures/$model-test.npy" \
    --clients 4 --inputs "$inputs" --rounds "$rounds" "$@" --json >"$out/serve-$name.json"
}
run digits-tcp digits-cnn-bn 16 3
run digits-tls digits-cnn-bn 16 3 --tls
run cifar-tcp residual-cifar 8 2
run cifar-tls residual-cifar 8 2 --tls
python3 bench/serve_table.py "$out"/serve-{digits,cifar}-{tcp,tls}.json
