#!/usr/bin/env bash
# Two helina binaries back to back on one ResNet-50 inference, alternating, so that both
# see the same machine state: `infer --net resnet50-imagenet --limit 1` on 2 threads,
# `runs` times each (default 2), with an empty cost cache (both plan with the reference
# costs: the same plan unless the change alters planning). Raw JSON goes to
# bench/results/ab/{before,after}-<run>.json; bench/ab_table.py prints the table (total,
# online, offline, the linear layers' steps, bytes, the client's time beyond the server's
# in the slot-packed layers, equal to the fixed-point reference).
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
python3 bench/ab_table.py "$out" "$runs"
