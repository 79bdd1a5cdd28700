#!/usr/bin/env bash
# Two helina binaries back to back on ResNet-50's linear layers alone (every linear layer
# under HE for real, the shares checked against the plaintext reference), alternating so
# that both see the same machine state: `bench network --net resnet50-imagenet --backend
# bfv --linear-only --session-inputs 1` on 2 threads, `runs` times each (default 2), with
# an empty cost cache (both plan with the reference costs: the same plan unless the
# change alters planning). Raw JSON goes to bench/results/ab-linear/{before,after}-<run>.json;
# the table gives the linear layers' time, the server time of the Cheetah layers (held
# and encoded per query), bytes, and whether every layer was correct.
#
#   bash bench/ab_linear.sh BEFORE_BINARY AFTER_BINARY [runs]
source "$(dirname "$0")/ab_lib.sh"
ab_args 2 bench/results/ab-linear "$@"
ab_alternate bench network --net resnet50-imagenet --backend bfv --linear-only \
  --session-inputs 1 --json
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
print("| binary | run | linear layers s | Cheetah layers, server s (per query / held) | MB | correct |")
print("|---|---|---|---|---|---|")
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        rows = [r for r in d["rows"] if r.get("pick")]
        ch = [r for r in rows if r["method"] == "cheetah"]
        fly = sum(r["server_ms"] for r in ch if r["on_the_fly"]) / 1e3
        held = sum(r["server_ms"] for r in ch if not r["on_the_fly"]) / 1e3
        ok = all(r.get("correct", True) for r in rows)
        print(f"| {side} | {run} | {d['linear_ms'] / 1e3:.1f} | {fly:.1f} / {held:.1f} | "
              f"{d['linear_bytes'] / 1e6:.0f} | {'yes' if ok else 'NO'} |")
PY
