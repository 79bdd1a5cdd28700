"""The table of bench/ab_infer.sh from its raw JSON: per binary and run, the inference's
total, online and offline time, the linear layers' steps (each the longer of the server's
and the client's time in it), bytes, the client's time beyond the server's in the layers
packed in slots (bsgs, heliks: its query encryption, response decryption and what else it
does there), and whether the result equals the fixed-point reference.

    python3 bench/ab_table.py bench/results/ab RUNS
"""
import json
import sys

out, runs = sys.argv[1], int(sys.argv[2])
print(
    "| binary | run | total s | online s | offline s | linear layers s | MB "
    "| slot-packed layers: client beyond server, s | equal to the fixed-point reference |"
)
print("|---|---|---|---|---|---|---|---|---|")
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        o = d["outputs"][0]
        linear = sum(
            max(l["server_ms"], l["client_ms"])
            for l in d["layers"]
            if l["kind"] in ("conv", "linear")
        )
        slot = sum(
            l["client_ms"] - l["server_ms"]
            for l in d["layers"]
            if l["method"] in ("bsgs", "heliks")
        )
        print(
            f"| {side} | {run} | {o['total_ms'] / 1e3:.1f} | {o['online_ms'] / 1e3:.1f} "
            f"| {o['offline_ms'] / 1e3:.1f} | {linear / 1e3:.1f} | {o['total_bytes'] / 1e6:.0f} "
            f"| {slot / 1e3:.2f} | {'yes' if o['matches_fixed_reference'] else 'no'} |"
        )
