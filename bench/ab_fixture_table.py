"""The table of bench/ab_fixture.sh from its raw JSON: per binary and run, the median
input's total and online time, the client's own work in each linear layer (its time in
the step less its wait for the response: the query's packing, encryption, rounding and
serialisation, the response's deserialisation and decryption; the session's step report,
`infer --json`'s layer rows), and whether every input equals the fixed-point reference;
then the medians over the runs per binary.

    python3 bench/ab_fixture_table.py bench/results/ab-fixture RUNS
"""
import json
import statistics
import sys

out, runs = sys.argv[1], int(sys.argv[2])
first = json.load(open(f"{out}/before-1.json"))
names = [(l["layer"], l["method"]) for l in first["layers"] if l["kind"] in ("conv", "linear")]
print(
    "| binary | run | total ms | online ms | "
    + " | ".join(f"{name} ({method}) client ms" for name, method in names)
    + " | equal to the fixed-point reference |"
)
print("|---" * (len(names) + 5) + "|")
rows = {"before": [], "after": []}
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        outs = d["outputs"]
        by_name = {l["layer"]: l for l in d["layers"]}
        row = [
            statistics.median(o["total_ms"] for o in outs),
            statistics.median(o["online_ms"] for o in outs),
        ] + [by_name[name]["client_ms"] - by_name[name]["client_wait_ms"] for name, _ in names]
        rows[side].append(row)
        equal = all(o["matches_fixed_reference"] for o in outs)
        print(
            f"| {side} | {run} | "
            + " | ".join(f"{x:.1f}" for x in row)
            + f" | {'yes' if equal else 'no'} ({len(outs)} inputs) |"
        )
for side, r in rows.items():
    med = [statistics.median(x[i] for x in r) for i in range(len(r[0]))]
    print(f"| {side} | median | " + " | ".join(f"{x:.1f}" for x in med) + " | |")
