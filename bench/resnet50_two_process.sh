#!/usr/bin/env bash
# ResNet-50 deployed as a user deploys it: a server process and a client process on this
# machine over loopback TCP, each with 2 threads (both on the same 2 cores), so that each
# party's peak memory is its own process's. The built-in network (seeded public weights)
# is exported as ONNX (`helina export`), compiled once on 32 calibration inputs
# (`helina compile --session-inputs 1`: planned once, the server then starts without
# calibrating), served by `helina server`, and queried RUNS times (default 3, one session
# of one input each) by `helina client --network --json`. The compiled model then runs the
# same input in one process (`helina infer --json`), which gives the float model's logits
# to compare the client's with and the one-process time beside the two-process one.
# Calibration and test input are uniform in [0, 1) (the built-in networks' demo data),
# from different seeds. Raw output: bench/results/resnet50-two-process/;
# bench/resnet50_two_process_table.py prints the table of BENCHMARKS.md.
source "$(dirname "$0")/lib.sh"
raw="$out/resnet50-two-process"
rm -rf "$raw"
mkdir -p "$raw"
work="$(mktemp -d)"
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# the planner's per-op costs measured on this machine now, in a scratch cache (as
# bench/resnet50.sh does)
export HELINA_CACHE_DIR="$work/cache"
"$bin" --threads 2 bench ops --params n8192-p28 --save >/dev/null
# numpy for the .npy inputs, in a virtual environment of the run's own
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet numpy
"$bin" export --net resnet50-imagenet --out "$work/resnet50.onnx"
"$work/venv/bin/python" - "$work" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
np.save(f"{work}/calibration.npy", np.random.default_rng(11).random((32, 3, 224, 224), dtype=np.float32))
np.save(f"{work}/input.npy", np.random.default_rng(7).random((1, 3, 224, 224), dtype=np.float32))
PY
"$bin" --threads 2 compile --model "$work/resnet50.onnx" --calibration "$work/calibration.npy" \
  --session-inputs 1 --out "$work/resnet50.helina" 2>&1 | tee "$raw/compile.log"
runs="${RUNS:-3}"
"$bin" --threads 2 server --model "$work/resnet50.helina" --listen 127.0.0.1:0 \
  --sessions "$runs" --session-inputs 1 >"$raw/server.log" 2>&1 &
server_pid=$!
addr=
for _ in $(seq 1 600); do
  addr="$(sed -n 's/^helina server: listening on \([0-9.:]*\).*/\1/p' "$raw/server.log")"
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$raw/server.log"; exit 1; }
  sleep 1
done
[ -n "$addr" ] || { echo "the server did not start listening" >&2; exit 1; }
for r in $(seq 1 "$runs"); do
  "$bin" --threads 2 client --network --connect "$addr" --input "$work/input.npy" --json \
    >"$raw/client-$r.json"
done
wait "$server_pid"
server_pid=
"$bin" --threads 2 infer --model "$work/resnet50.helina" --input "$work/input.npy" --json \
  >"$raw/one-process.json"
python3 bench/resnet50_two_process_table.py "$raw"
