# Sourced by the scripts of bench/: strict mode, the repository root, a release build of
# the helina binary ($bin), and the folder of raw results ($out).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p cli
bin=target/release/helina
out=bench/results
mkdir -p "$out"
