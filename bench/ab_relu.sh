#!/usr/bin/env bash
# Two helina binaries back to back on ResNet-50's largest ReLU layer (802 816 ReLUs with
# approximate truncation by 2^7 and the 3-bit coarse DReLU at the 28-bit p, as the
# planner runs layer1's ReLUs), alternating so that both see the same machine state:
# `bench relu` on 2 threads, `runs` times each (default 3). Raw JSON goes to
# bench/results/ab-relu/{before,after}-<run>.json; the table gives offline and online
# time, bytes and COTs per ReLU, and whether the shares reconstruct the reference.
#
#   bash bench/ab_relu.sh BEFORE_BINARY AFTER_BINARY [runs]
source "$(dirname "$0")/ab_lib.sh"
ab_args 3 bench/results/ab-relu "$@"
ab_alternate bench relu --count 802816 --truncate 7 --approx-trunc --within-quarter \
  --coarse-drelu 3 --params n8192-p28 --reps 1 --json
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
print("| binary | run | offline ms | online ms | offline bytes | online bytes | COTs per ReLU | correct |")
print("|---|---|---|---|---|---|---|---|")
med = {}
for run in range(1, runs + 1):
    for side in ("before", "after"):
        r = json.load(open(f"{out}/{side}-{run}.json"))
        med.setdefault(side, []).append(r["offline_ms"])
        print(f"| {side} | {run} | {r['offline_ms']:.0f} | {r['online_ms']:.0f} | "
              f"{r['bytes_offline']} | {r['bytes_online']} | {r['cots_per_element']:.1f} | "
              f"{'yes' if r['correct'] else 'NO'} |")
print()
print("median offline ms: " + ", ".join(f"{s} {statistics.median(v):.0f}" for s, v in med.items()))
PY
