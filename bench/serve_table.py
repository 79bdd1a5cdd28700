"""Prints the markdown table of `helina bench serve` JSON reports (bench/serve.sh)."""
import json
import statistics
import sys

print("| run | clients x inputs | rounds | inferences/s (median) | latency p50 / p99 ms | first result p50 ms | failures | server RSS start -> peak -> end, MB (last round) | CPU use |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    r = json.load(open(path))
    rounds = r["rounds"]
    last = rounds[-1]
    name = path.rsplit("/", 1)[-1].removeprefix("serve-").removesuffix(".json")
    failures = sum(sum(x["failures"].values()) for x in rounds)
    mb = lambda b: f"{b / 1e6:.0f}" if b else "n/a"
    print(
        f"| {name} | {r['clients']} x {r['inputs_per_session']} | {len(rounds)} "
        f"| {statistics.median(x['inferences_per_s'] for x in rounds):.2f} "
        f"| {statistics.median(x['latency']['p50_ms'] for x in rounds):.0f} / "
        f"{statistics.median(x['latency']['p99_ms'] for x in rounds):.0f} "
        f"| {statistics.median(x['first_result']['p50_ms'] for x in rounds):.0f} "
        f"| {failures} "
        f"| {mb(last['server_rss_start_bytes'])} -> {mb(last['server_rss_peak_bytes'])} -> {mb(last['server_rss_end_bytes'])} "
        f"| {statistics.median(x['cpu_utilisation'] for x in rounds) * 100:.0f}% of {r['cores']} cores |"
    )
