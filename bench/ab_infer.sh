#!/usr/bin/env bash
# Two helina binaries back to back on one ResNet-50 inference, alternating, so that both
# see the same machine state: `infer --net resnet50-imagenet --limit 1` on 2 threads,
# `runs` times each (default 2), with an empty cost cache (both plan with the reference
# costs: the same plan unless the change alters planning). Raw JSON goes to
# bench/results/ab/{before,after}-<run>.json; the table (total, online, offline, bytes, the
# client's time beyond the server's in the slot-packed layers, equal to the fixed-point
# reference) goes to stdout.
#
#   bash bench/ab_infer.sh BEFORE_BINARY AFTER_BINARY [runs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
before=$(realpath "$1")
after=$(realpath "$2")
runs=${3:-2}
out=bench/results/ab
mkdir -p "$out"
HELINA_CACHE_DIR="$(mktemp -d)"
export HELINA_CACHE_DIR
trap 'rm -rf "$HELINA_CACHE_DIR"' EXIT
for run in $(seq 1 "$runs"); do
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    "$bin" --threads 2 infer --net resnet50-imagenet --limit 1 --json >"$out/$side-$run.json"
  done
done
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
# slot-packed layers (bsgs, heliks): the client's time in the step beyond the server's
# (its query encryption, response decryption and what else it does there)
print("| binary | run | total s | online s | offline s | MB | slot-packed layers: client beyond server, s | equal to the fixed-point reference |")
print("|---|---|---|---|---|---|---|---|")
for run in range(1, runs + 1):
    for side in ("before", "after"):
        d = json.load(open(f"{out}/{side}-{run}.json"))
        o = d["outputs"][0]
        slot = sum(
            l["client_ms"] - l["server_ms"]
            for l in d["layers"]
            if l["method"] in ("bsgs", "heliks")
        )
        print(
            f"| {side} | {run} | {o['total_ms'] / 1e3:.1f} | {o['online_ms'] / 1e3:.1f} "
            f"| {o['offline_ms'] / 1e3:.1f} | {o['total_bytes'] / 1e6:.0f} | {slot / 1e3:.2f} "
            f"| {'yes' if o['matches_fixed_reference'] else 'no'} |"
        )
PY
