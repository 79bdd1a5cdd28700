# Sourced by the A/B scripts of bench/ (`ab_*.sh BEFORE_BINARY AFTER_BINARY [runs]`):
# strict mode, the repository root, the two binaries ($before, $after), the runs ($runs,
# default $1 of `ab_args`), the folder of raw results ($out: the script's, or $AB_OUT), an
# empty cost cache (both binaries plan with the reference costs; with AB_COSTS=measured,
# the costs the after binary measures here first, `bench ops --save` for each parameter
# set in $AB_PARAMS, default n8192-p28, which both binaries then plan with), and
# `ab_alternate ARGS...`, which runs
# `BINARY --threads 2 ARGS...` alternately, before then after, `runs` times each, into
# $out/{before,after}-<run>.json, so that both see the same machine state (first calling
# `ab_prepare BINARY SIDE RUN` where the script defines it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ab_args DEFAULT_RUNS OUT_DIR BEFORE AFTER [RUNS]
ab_args() {
  runs=${5:-$1}
  out=${AB_OUT:-$2}
  before=$(realpath "$3")
  after=$(realpath "$4")
  mkdir -p "$out"
  HELINA_CACHE_DIR="$(mktemp -d)"
  export HELINA_CACHE_DIR
  trap 'rm -rf "$HELINA_CACHE_DIR"' EXIT
  if [ "${AB_COSTS:-reference}" = measured ]; then
    local params
    for params in ${AB_PARAMS:-n8192-p28}; do
      "$after" --threads 2 bench ops --params "$params" --save >/dev/null
    done
  fi
}

ab_alternate() {
  local run side bin
  for run in $(seq 1 "$runs"); do
    for side in before after; do
      bin=$before
      [ "$side" = after ] && bin=$after
      if declare -F ab_prepare >/dev/null; then
        ab_prepare "$bin" "$side" "$run"
      fi
      "$bin" --threads 2 "$@" >"$out/$side-$run.json"
    done
  done
}
