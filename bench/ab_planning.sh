#!/usr/bin/env bash
# Two helina binaries back to back on planning ResNet-50 (the fixed-point search and
# calibration on the default 32 calibration inputs, then the method of every linear
# layer), alternating, so that both see the same machine state: `inspect --net
# resnet50-imagenet --json` on 2 threads, `runs` times each (default 3), with an empty
# cost cache (both plan with the reference costs). Raw JSON goes to
# bench/results/ab-planning/{before,after}-<run>.json; the table gives each run's
# planning time and whether its plan (fixed point, accuracy, methods, everything but the
# timings) equals the first run's of `before`.
#
#   bash bench/ab_planning.sh BEFORE_BINARY AFTER_BINARY [runs]
source "$(dirname "$0")/ab_lib.sh"
ab_args 3 bench/results/ab-planning "$@"
ab_alternate inspect --net resnet50-imagenet --json
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])

def plan(r):
    # everything but the timings
    return json.dumps({k: v for k, v in r.items() if k != "planning"}, sort_keys=True)

ref = plan(json.load(open(f"{out}/before-1.json")))
print("| binary | run | fixed point s | methods s | planning s | same plan as before-1 |")
print("|---|---|---|---|---|---|")
total = {}
for run in range(1, runs + 1):
    for side in ("before", "after"):
        r = json.load(open(f"{out}/{side}-{run}.json"))
        fp, m = r["planning"]["fixed_point_ms"] / 1e3, r["planning"]["methods_ms"] / 1e3
        total.setdefault(side, []).append(fp + m)
        print(f"| {side} | {run} | {fp:.1f} | {m:.1f} | {fp + m:.1f} | "
              f"{'yes' if plan(r) == ref else 'NO'} |")
print()
print("median planning s: " + ", ".join(f"{s} {statistics.median(v):.1f}" for s, v in total.items()))
PY
