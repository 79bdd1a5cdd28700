#!/usr/bin/env bash
# Two helina binaries back to back on a committed fixture network, alternating, so that
# both see the same machine state: `infer --json` on 2 threads with the fixture's
# calibration and test inputs, $LIMIT inputs (default 4) of $FIXTURE (default
# mobilenet-block), `runs` times each (default 3), with an empty cost cache (both plan with
# the reference costs). Raw JSON goes to bench/results/ab-fixture/{before,after}-<run>.json
# (or $AB_OUT); bench/ab_fixture_table.py prints the table (per run: the median input's
# total and online time, the clients' own work in each linear layer, equal to the
# fixed-point reference).
#
#   bash bench/ab_fixture.sh BEFORE_BINARY AFTER_BINARY [runs]
source "$(dirname "$0")/ab_lib.sh"
ab_args 3 bench/results/ab-fixture "$@"
fixture=${FIXTURE:-mobilenet-block}
ab_alternate infer --json --model "fixtures/$fixture.onnx" \
  --calibration "fixtures/$fixture-calibration.npy" --input "fixtures/$fixture-test.npy" \
  --limit "${LIMIT:-4}"
python3 bench/ab_fixture_table.py "$out" "$runs"
