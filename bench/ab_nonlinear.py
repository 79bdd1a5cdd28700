"""The nonlinear layers of bench/ab_infer.sh's runs from their raw JSON: per binary and
run, the nonlinear steps' online time (each the longer of the server's and the client's
time in it) and offline time (each the longer party's own work), the inference's total,
and medians per binary.

    python3 bench/ab_nonlinear.py bench/results/ab RUNS
"""
import json
import statistics
import sys

out, runs = sys.argv[1], int(sys.argv[2])
rows = {"before": [], "after": []}
print("| binary | run | nonlinear online s | nonlinear offline s | total s |")
print("|---|---|---|---|---|")
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        steps = [l for l in d["layers"] if l["method"] in ("ot", "gc")]
        online = sum(max(l["server_ms"], l["client_ms"]) for l in steps) / 1e3
        offline = sum(l["offline_ms"] for l in steps) / 1e3
        total = d["outputs"][0]["total_ms"] / 1e3
        rows[side].append((online, offline, total))
        print(f"| {side} | {run} | {online:.2f} | {offline:.1f} | {total:.1f} |")
for side in ("before", "after"):
    med = [statistics.median(r[i] for r in rows[side]) for i in range(3)]
    print(f"| {side} | median | {med[0]:.2f} | {med[1]:.1f} | {med[2]:.1f} |")
