"""The linear layers' online time by party, from the raw JSON of bench/ab_infer.sh (binaries
whose `infer --json` reports each party's wait for the other's ciphertexts,
`server_wait_ms` and `client_wait_ms`, since 414f5ef): per binary and run, the client's own
work (its query's packing, encryption, rounding and serialisation, the response's
deserialisation and decryption: its time in the step less its wait for the response), the
server's own work (its cleartext part, the query's deserialisation, the products and the
response: its time less its wait for the query), and the steps (the client's time), then
the medians per binary.

    python3 bench/ab_parties.py bench/results/ab RUNS
"""
import json
import statistics
import sys

out, runs = sys.argv[1], int(sys.argv[2])
print("| binary | run | client's own work s | server's own work s | linear steps s |")
print("|---|---|---|---|---|")
rows = {"before": [], "after": []}
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        layers = [l for l in d["layers"] if l["kind"] in ("conv", "linear")]
        if not all("client_wait_ms" in l for l in layers):
            sys.exit(f"{out}/{side}-{run}.json has no per-party waits (a binary before 414f5ef)")
        row = (
            sum(l["client_ms"] - l["client_wait_ms"] for l in layers) / 1e3,
            sum(l["server_ms"] - l["server_wait_ms"] for l in layers) / 1e3,
            sum(l["client_ms"] for l in layers) / 1e3,
        )
        rows[side].append(row)
        print(f"| {side} | {run} | " + " | ".join(f"{x:.2f}" for x in row) + " |")
for side, r in rows.items():
    med = [statistics.median(x[i] for x in r) for i in range(3)]
    print(f"| {side} | median | " + " | ".join(f"{x:.2f}" for x in med) + " |")
