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
source "$(dirname "$0")/ab_lib.sh"
ab_args 2 bench/results/ab "$@"
ab_alternate infer --net resnet50-imagenet --limit 1 --json
python3 bench/ab_table.py "$out" "$runs"
