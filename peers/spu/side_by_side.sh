#!/usr/bin/env bash
# Side by side, in one run: SecretFlow SPU 0.9.5 (Cheetah 2PC, peers/spu/bench_spu_nets.py)
# and helina (`target/release/helina infer --net NET --json`) on the same whole networks,
# then a table (time s, MB) with ratios SPU / helina.
#
# Usage (from anywhere; it cd's to the repository root):
#     peers/spu/side_by_side.sh
# Environment knobs:
#     NETS="mnist-d minionn-cifar"   networks (names of helina's zoo and of bench_spu_nets.py)
#     REPS=3                         SPU warm runs per network (median reported; +1 cold run)
#     HELINA_REPS=1                  helina runs per network (median of total_ms reported)
#     SPU_PY=/tmp/spu-venv/bin/python  python with spu==0.9.5
#     HELINA=target/release/helina   the helina binary (not built by this script)
#     OUT=/tmp/helina_vs_spu_<date>  where the JSON files and logs go
#     SPU_JSON=path                  reuse an existing bench_spu_nets.py results file, skip SPU
#     HELINA_ARGS=""                 extra arguments for `helina infer` (e.g. "--threads 2")
# Both SPU parties and both helina parties run on this machine (loopback TCP), one after
# the other; nothing else should run meanwhile.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
NETS="${NETS:-mnist-d minionn-cifar}"
REPS="${REPS:-3}"
HELINA_REPS="${HELINA_REPS:-1}"
SPU_PY="${SPU_PY:-/tmp/spu-venv/bin/python}"
HELINA="${HELINA:-target/release/helina}"
OUT="${OUT:-/tmp/helina_vs_spu_$(date +%Y%m%d_%H%M%S)}"
HELINA_ARGS="${HELINA_ARGS:-}"
mkdir -p "$OUT"
PY="$SPU_PY"
[ -x "$PY" ] || PY=python3

echo "# side_by_side: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# output folder: $OUT"
echo "# helina: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty tree)'), binary $HELINA"

# (1) SPU
if [ -n "${SPU_JSON:-}" ]; then
    echo "# SPU: reusing $SPU_JSON"
    cp "$SPU_JSON" "$OUT/spu.json"
else
    [ -x "$SPU_PY" ] || { echo "no $SPU_PY: python3 -m venv /tmp/spu-venv && /tmp/spu-venv/bin/pip install spu==0.9.5" >&2; exit 1; }
    CASES="$(echo $NETS | tr ' ' ',')"
    echo "# (1) SPU: $SPU_PY peers/spu/bench_spu_nets.py --cases $CASES --reps $REPS --max-extra 0 --out $OUT/spu.json"
    "$SPU_PY" peers/spu/bench_spu_nets.py --cases "$CASES" --reps "$REPS" --max-extra 0 \
        --out "$OUT/spu.json" 2>&1 | grep -v -i 'warning' | tee "$OUT/spu.log" | grep -E '^(==|   )' || true
    [ -s "$OUT/spu.json" ] || { echo "SPU run produced no $OUT/spu.json (see $OUT/spu.log)" >&2; exit 1; }
fi

# (2) helina
[ -x "$HELINA" ] || { echo "no $HELINA (build it with cargo build --release first)" >&2; exit 1; }
for net in $NETS; do
    for i in $(seq 1 "$HELINA_REPS"); do
        echo "# (2) helina: $HELINA infer --net $net --json $HELINA_ARGS   [run $i/$HELINA_REPS]"
        # shellcheck disable=SC2086
        if ! "$HELINA" infer --net "$net" --json $HELINA_ARGS > "$OUT/helina_${net}_$i.json" 2> "$OUT/helina_${net}_$i.err"; then
            echo "  helina failed on $net (see $OUT/helina_${net}_$i.err):" >&2
            tail -3 "$OUT/helina_${net}_$i.err" >&2 || true
            rm -f "$OUT/helina_${net}_$i.json"
        fi
    done
done

# (3) table
"$PY" - "$OUT" "$HELINA_REPS" $NETS <<'PYEOF'
import json, os, statistics, sys

out, hreps, nets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
spu = {c["case"]: c for c in json.load(open(os.path.join(out, "spu.json")))["cases"]}

def helina(net):
    runs = []
    for i in range(1, hreps + 1):
        p = os.path.join(out, f"helina_{net}_{i}.json")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            try:
                runs.append(json.load(open(p)))
            except ValueError:
                pass
    if not runs:
        return None
    med = lambda f: statistics.median(f(r) for r in runs)
    o = lambda r: r["outputs"][0]
    return dict(n=len(runs), total_s=med(lambda r: o(r)["total_ms"]) / 1e3,
                online_s=med(lambda r: o(r)["online_ms"]) / 1e3,
                total_mb=med(lambda r: o(r)["total_bytes"]) / 1e6,
                online_mb=med(lambda r: o(r)["online_bytes"]) / 1e6,
                setup_s=med(lambda r: r["setup_ms"]) / 1e3,
                setup_mb=med(lambda r: r["setup_bytes"]) / 1e6,
                params=runs[0].get("params"), frac_bits=runs[0].get("frac_bits"),
                ok=all(o(r).get("matches_fixed_reference", False) for r in runs))

def f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"

def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.1f}x" if r >= 1 else f"{r:.2f}x"

rows = []
for net in nets:
    s, h = spu.get(net), helina(net)
    if s is not None and "error" in s:
        print(f"{net}: SPU error {s['error']}")
        s = None
    S = None
    if s is not None:
        S = dict(warm_s=s["warm_wall_median_s"], first_s=s["first_run"]["wall_s"],
                 r0_mb=s["sent_bytes_rank0"] / 1e6, r1_mb=s["sent_bytes_rank1"] / 1e6,
                 first_mb=(s["first_run"]["sent_bytes_rank0"] + s["first_run"]["sent_bytes_rank1"]) / 1e6,
                 n=s["n_warm"])
        S["mb"] = S["r0_mb"] + S["r1_mb"]
    rows.append((net, S, h))

print()
print("Per inference (batch 1). SPU = Cheetah 2PC, warm run (session keys/OT set up in an earlier run),")
print("median of its warm runs; SPU cold = its first run on a fresh runtime, setup included.")
print("helina total = offline + online of one inference; helina setup (keys) is separate.")
print("MB = bytes sent by both parties together (SPU: payload per party r0 client + r1 server).")
print()
g = lambda d, k: None if d is None else d[k]
print("Time (s):")
print()
print("| net | SPU warm | SPU cold (incl. setup) | helina total | helina online | helina setup "
      "| SPU warm / helina total | SPU warm / helina online |")
print("|" + "---|" * 8)
for net, S, h in rows:
    print(f"| {net} | {f(g(S, 'warm_s'))} | {f(g(S, 'first_s'))} | {f(g(h, 'total_s'))} "
          f"| {f(g(h, 'online_s'))} | {f(g(h, 'setup_s'))} "
          f"| {ratio(g(S, 'warm_s'), g(h, 'total_s'))} | {ratio(g(S, 'warm_s'), g(h, 'online_s'))} |")
print()
print("Communication (MB = 10^6 bytes, both directions):")
print()
print("| net | SPU warm (r0 client + r1 server) | SPU cold (incl. setup) | helina total | helina online "
      "| helina setup | SPU warm / helina total | SPU warm / helina online |")
print("|" + "---|" * 8)
for net, S, h in rows:
    spu_mb = "-" if S is None else f"{S['mb']:.2f} ({S['r0_mb']:.2f} + {S['r1_mb']:.2f})"
    print(f"| {net} | {spu_mb} | {f(g(S, 'first_mb'), 2)} | {f(g(h, 'total_mb'), 2)} "
          f"| {f(g(h, 'online_mb'), 2)} | {f(g(h, 'setup_mb'), 2)} "
          f"| {ratio(g(S, 'mb'), g(h, 'total_mb'))} | {ratio(g(S, 'mb'), g(h, 'online_mb'))} |")
print()
for net, S, h in rows:
    extra = []
    if S is not None:
        extra.append(f"SPU warm runs {S['n']}")
    if h is not None:
        extra.append(f"helina runs {h['n']}, params {h['params']}, frac_bits {h['frac_bits']}, "
                     f"matches fixed reference: {h['ok']}")
        if S is not None:
            extra.append(f"SPU cold / (helina setup + total) = "
                         f"{ratio(S['first_s'], h['setup_s'] + h['total_s'])} time, "
                         f"{ratio(S['first_mb'], h['setup_mb'] + h['total_mb'])} MB")
    else:
        extra.append("helina: no result")
    print(f"{net}: " + "; ".join(extra))
summary = {net: dict(spu=S, helina=h) for net, S, h in rows}
with open(os.path.join(out, "side_by_side.json"), "w") as fh:
    json.dump(summary, fh, indent=1)
print(f"\n(raw: {out}/spu.json, {out}/helina_<net>_<i>.json, summary {out}/side_by_side.json)")
PYEOF
