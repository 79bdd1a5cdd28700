"""Prints the two-process ResNet-50 table of BENCHMARKS.md (bench/resnet50_two_process.sh):
per session, the client's times and bytes, each party's peak memory (the client's from its
JSON, the server's from its log line for that session: the process's peak so far), and
the client's logits against the float model's (from the one-process run of the same
compiled model and input), then the one-process run beside them.

Usage: resnet50_two_process_table.py RAW_DIR (client-N.json, server.log, one-process.json)."""
import glob
import json
import re
import sys

raw = sys.argv[1]
clients = [
    json.load(open(f))
    for f in sorted(glob.glob(f"{raw}/client-*.json"), key=lambda f: int(re.findall(r"\d+", f)[-1]))
]
local = json.load(open(f"{raw}/one-process.json"))
server_rss = [
    float(m)
    for m in re.findall(r"inference\(s\) in [0-9.]+ ms;.*peak RSS ([0-9.]+) MB", open(f"{raw}/server.log").read())
]
if not clients or len(server_rss) != len(clients):
    sys.exit(f"{len(clients)} client runs but {len(server_rss)} server sessions in {raw}/server.log")
lo = local["outputs"][0]
float_logits = lo["float_logits"]
tolerance = local["accuracy"]["tolerance"]
argmax = lambda v: max(range(len(v)), key=v.__getitem__)
print(
    "| run | total s (online / offline) | setup s | MB | client peak RSS | server peak RSS "
    "| max abs(client - float) | argmax = float's |"
)
print("|---|---|---|---|---|---|---|---|")
for k, (c, srss) in enumerate(zip(clients, server_rss), 1):
    o = c["outputs"][0]
    err = max(abs(a - b) for a, b in zip(o["logits"], float_logits))
    if err > tolerance:
        sys.exit(f"run {k}: the client's logits are {err} from float, beyond the tolerance {tolerance}")
    print(
        f"| two processes, session {k} | {o['total_ms'] / 1e3:.1f} ({o['online_ms'] / 1e3:.1f} / "
        f"{o['offline_ms'] / 1e3:.1f}) | {c['setup_ms'] / 1e3:.1f} | {o['total_bytes'] / 1e6:.0f} "
        f"| {c['peak_rss_bytes'] / 1e9:.2f} GB | {srss / 1e3:.2f} GB | {err:.4f} "
        f"| {'yes' if o['argmax'] == argmax(float_logits) else 'no'} |"
    )
print(
    f"| one process (both parties) | {lo['total_ms'] / 1e3:.1f} ({lo['online_ms'] / 1e3:.1f} / "
    f"{lo['offline_ms'] / 1e3:.1f}) | {local['setup_ms'] / 1e3:.1f} | {lo['total_bytes'] / 1e6:.0f} "
    f"| {local['peak_rss_bytes'] / 1e9:.2f} GB (both) | | {lo['float_max_abs_err']:.4f} "
    f"| {'yes' if lo['argmax'] == lo['float_argmax'] else 'no'} |"
)
print()
print(
    f"tolerance {tolerance}; the one-process run equal to the fixed-point reference: "
    f"{lo['matches_fixed_reference']}"
)
