"""Prints the ResNet-50 table of BENCHMARKS.md (bench/resnet50.sh) beside HELiKs's
published figures (HELiKs §6.2 Fig. 9: all linear layers on 4 threads; §6.3 Fig. 10:
end to end with CrypTFlow2's nonlinear layers, and Cheetah in the same run), and the
projection (`bench network --backend count --as-served`) against the measured inference.

Usage: resnet50_table.py LINEAR.json RUN.json [RUN.json ...]: each RUN is a run of the
inference (`infer --json`) or a projection (`bench network --json`), told apart by their
content, in the order they ran. The tables show the median inference run (by total time)
against the median projection (by predicted total), and list every run's total; the
machine's speed moves by ±25% from minute to minute, so bench/resnet50.sh alternates the
two."""
import json
import statistics
import sys

linear = json.load(open(sys.argv[1]))
loaded = [json.load(open(f)) for f in sys.argv[2:]]
runs = [r for r in loaded if "outputs" in r]
projections = [r for r in loaded if "rows" in r]
if not runs or not projections:
    sys.exit("usage: resnet50_table.py LINEAR.json RUN.json [RUN.json ...] (inferences and projections)")
# the median run by total time (the lower middle one for an even count)
by_total = sorted(runs, key=lambda r: r["outputs"][0]["total_ms"])
infer = by_total[(len(by_total) - 1) // 2]
predicted_total = lambda p: p["total_ms"] + p["offline_ms"]
projected = sorted(projections, key=predicted_total)[(len(projections) - 1) // 2]
out = infer["outputs"][0]
gb = lambda b: f"{b / 1e9:.2f} GB"
mb = lambda b: f"{b / 1e6:.0f} MB"
print("| what | system | threads | time | communication | peak RSS |")
print("|---|---|---|---|---|---|")
print(
    f"| all linear layers | helina (measured) | {linear['threads']} | {linear['linear_ms'] / 1e3:.1f} s "
    f"| {mb(linear['linear_bytes'])} | {gb(linear['peak_rss_bytes'])} |"
)
print("| all linear layers | HELiKs (paper, Fig. 9) | 4 | 60 s | 482 MB | n/a |")
print("| all linear layers | Cheetah (HELiKs's run, Fig. 9) | 4 | 117 s | ~1052 MB | n/a |")
print(
    f"| one inference end to end | helina (measured; online {out['online_ms'] / 1e3:.1f} s, "
    f"offline {out['offline_ms'] / 1e3:.1f} s; setup {infer['setup_ms'] / 1e3:.1f} s not included) "
    f"| 2 | {out['total_ms'] / 1e3:.1f} s | {gb(out['total_bytes'])} | {gb(infer['peak_rss_bytes'])} |"
)
print("| one inference end to end | HELiKs + CrypTFlow2 nonlinear (paper, Fig. 10) | 4 | 183 s | close to CF2's | n/a |")
print("| one inference end to end | Cheetah (HELiKs's run, Fig. 10) | 4 | 273 s | n/a | n/a |")
print()
totals = [r["outputs"][0]["total_ms"] / 1e3 for r in runs]
equal = sum(r["outputs"][0]["matches_fixed_reference"] for r in runs)
print(
    f"{len(runs)} runs of the inference (in order): "
    + ", ".join(f"{t:.1f} s" for t in totals)
    + f"; median {statistics.median(totals):.1f} s; equal to the fixed-point reference in {equal} of {len(runs)}; "
    f"peak RSS up to {gb(max(r['peak_rss_bytes'] for r in runs))}. The rows above and below are the median run's."
)
print()
print(
    f"helina's check: {'equal' if out['matches_fixed_reference'] else 'NOT equal'} to the fixed-point "
    f"reference; max abs(private - float) {out['float_max_abs_err']:.4f}; planning "
    f"{infer['planning']['fixed_point_ms'] / 1e3:.1f} s (fixed point) + {infer['planning']['methods_ms'] / 1e3:.1f} s (methods); "
    f"approximate truncation on {len(infer.get('approximate_truncation', []))} of {infer.get('truncating_steps', 0)} truncating steps "
    f"({infer['p'].bit_length()}-bit p, {infer['frac_bits']} fractional bits)."
)

print()
print(
    f"{len(projections)} projections (in order, each after the run above it): predicted "
    + ", ".join(f"{predicted_total(p) / 1e3:.1f} s" for p in projections)
    + f"; the median one ({predicted_total(projected) / 1e3:.1f} s) below."
)

# the projection against the measurement: online (linear + nonlinear online), offline
pred = {
    "online": (projected["total_ms"], projected["total_bytes"]),
    "offline": (projected["offline_ms"], projected["offline_bytes"]),
}
pred["total"] = tuple(a + b for a, b in zip(pred["online"], pred["offline"]))
meas = {k: (out[f"{k}_ms"], out[f"{k}_bytes"]) for k in ("online", "offline", "total")}
print()
print("| projection (count backend, the served program) | predicted time | measured time | predicted bytes | measured bytes |")
print("|---|---|---|---|---|")
for k in ("online", "offline", "total"):
    (pt, pb), (mt, mbytes) = pred[k], meas[k]
    print(
        f"| {k} | {pt / 1e3:.1f} s | {mt / 1e3:.1f} s ({(pt / mt - 1) * 100:+.0f}%) "
        f"| {mb(pb)} | {mb(mbytes)} ({(pb / mbytes - 1) * 100:+.0f}%) |"
    )

# per layer: each picked row of the projection against the same layer of the run (time
# over 50 ms only). Online, the client's time in the step: the inference's online time is
# the client's, and its steps sum to it (the server's step also holds its wait for the
# client's previous step). Offline, the longer party's.
measured = {l["layer"]: l for l in infer["layers"]}
errors = {}
for row in projected["rows"]:
    layer = measured.get(row["layer"])
    if not row.get("pick") or layer is None:
        continue
    kind = "linear" if row["kind"] in ("conv", "matvec") else "nonlinear"
    for part, p, m in (
        ("online", row["ms"], layer["client_ms"]),
        ("offline", row["offline_ms"], layer["offline_ms"]),
    ):
        if m > 50:
            errors.setdefault((kind, part), []).append(p / m - 1)
print()
print("| per layer (measured over 50 ms) | layers | within 20% | median error | range |")
print("|---|---|---|---|---|")
for (kind, part), e in sorted(errors.items()):
    print(
        f"| {kind}, {part} | {len(e)} | {sum(abs(x) <= 0.2 for x in e)} "
        f"| {statistics.median(e) * 100:+.0f}% | {min(e) * 100:+.0f}% to {max(e) * 100:+.0f}% |"
    )

# The linear layers online, by party: each party's own work is its time in the step less
# its wait for the other's ciphertexts (`server_wait_ms`, `client_wait_ms`: the server's
# own work includes its cleartext part W·x_S + b, which the projection does not price).
linear_rows = [
    (row, measured[row["layer"]])
    for row in projected["rows"]
    if row.get("pick") and row["kind"] in ("conv", "matvec") and row["layer"] in measured
]
if linear_rows and all("server_wait_ms" in m for _, m in linear_rows):
    parts = (
        ("server's own work (products, response; its cleartext part)", "predicted_server_ms",
         lambda m: m["server_ms"] - m["server_wait_ms"]),
        ("client's own work (query, decryption)", "predicted_client_ms",
         lambda m: m["client_ms"] - m["client_wait_ms"]),
        ("step (the client's time)", "ms", lambda m: m["client_ms"]),
    )
    print()
    print(f"| linear layers online, {len(linear_rows)} layers | predicted | measured | error |")
    print("|---|---|---|---|")
    for name, key, f in parts:
        p = sum(r[key] for r, _ in linear_rows)
        m = sum(f(m) for _, m in linear_rows)
        print(f"| {name} | {p / 1e3:.1f} s | {m / 1e3:.1f} s | {(p / m - 1) * 100:+.0f}% |")

# How far the machine lets a per-layer prediction go: the same layer's time from one run
# to the next (max/min − 1 over the runs, layers over 50 ms in every run), and each run
# against its own projection (the one run right after it).
pairs = list(zip(runs, projections))
if len(runs) > 1 and len(pairs) == len(runs):
    per_run = [{l["layer"]: l for l in r["layers"]} for r in runs]
    print()
    print(
        f"| per layer, over the {len(runs)} runs | layers | the same layer from run to run, median spread "
        "| within 20% of its own projection, per run |"
    )
    print("|---|---|---|---|")
    for (kind, part) in sorted(errors):
        key, pkey = ("client_ms", "ms") if part == "online" else ("offline_ms", "offline_ms")
        spreads, within, count = [], [0] * len(pairs), 0
        for name in per_run[0]:
            is_linear = per_run[0][name]["kind"] in ("conv", "linear")
            if (kind == "linear") != is_linear or any(name not in m for m in per_run):
                continue
            v = [m[name][key] for m in per_run]
            if min(v) <= 50:
                continue
            count += 1
            spreads.append(max(v) / min(v) - 1)
            for i, (_, proj) in enumerate(pairs):
                row = next((r for r in proj["rows"] if r.get("pick") and r["layer"] == name), None)
                if row is not None and abs(row[pkey] / per_run[i][name][key] - 1) <= 0.2:
                    within[i] += 1
        if count:
            print(
                f"| {kind}, {part} | {count} | {statistics.median(spreads) * 100:.0f}% "
                f"| {', '.join(str(w) for w in within)} |"
            )
