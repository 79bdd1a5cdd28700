#!/usr/bin/env bash
# helina beside the peer, SecretFlow SPU 0.9.5 running Cheetah (peers/spu), in one run:
# the same network shapes in both (helina's built-in zoo, seeded weights; the peer's JAX
# versions in peers/spu/bench_spu_nets.py), SPU's warm runs first, then helina's
# (`helina --threads 2 infer --net NET --json`), then the table with ratios. Needs the
# peer installed once: python3 -m venv /tmp/spu-venv && /tmp/spu-venv/bin/pip install spu==0.9.5
# Raw output: bench/results/peer/ (spu.json, helina_<net>_<run>.json, side_by_side.json);
# the printed table is bench/results/peer/table.md.
source "$(dirname "$0")/lib.sh"
# the committed results aside while the run writes new ones; a run that stops early
# (no SPU installed, a failed inference) puts them back
prev="$out/peer.prev"
rm -rf "$prev" && { [ ! -d "$out/peer" ] || mv "$out/peer" "$prev"; }
trap '[ ! -d "$prev" ] || { rm -rf "$out/peer" && mv "$prev" "$out/peer"; }' EXIT
mkdir -p "$out/peer"
NETS="mnist-d residual-block-cifar minionn-cifar" REPS=3 HELINA_REPS=3 \
  HELINA_ARGS="--threads 2" OUT="$out/peer" HELINA="$bin" \
  peers/spu/side_by_side.sh | tee "$out/peer/table.md.tmp"
# the table only (from its first line on), without the run's folder names
sed -n '/^Per inference/,$p' "$out/peer/table.md.tmp" | grep -v '^(raw:' >"$out/peer/table.md"
rm "$out/peer/table.md.tmp"
find "$out/peer" -name "*.err" -empty -delete
# a complete run: the earlier results go
rm -rf "$prev"
