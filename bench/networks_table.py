"""Prints the markdown table of `helina infer --json` reports (bench/networks.sh): per
model, medians over every input of every run."""
import collections
import json
import re
import statistics
import sys

runs = collections.OrderedDict()
for path in sys.argv[1:]:
    name = re.sub(r"^network-|-\d+\.json$", "", path.rsplit("/", 1)[-1])
    runs.setdefault(name, []).append(json.load(open(path)))

print("| model | inputs x runs | parameters, fractional bits, approximate truncations | time per inference ms: total (online / offline) | MB per inference: total (online / offline) | setup ms / MB | max abs(private - float) | equal to the fixed-point reference | peak RSS MB |")
print("|---|---|---|---|---|---|---|---|---|")
for name, reports in runs.items():
    outs = [o for r in reports for o in r["outputs"]]
    med = lambda key: statistics.median(o[key] for o in outs)
    first = reports[0]
    print(
        f"| {name} | {len(reports[0]['outputs'])} x {len(reports)} "
        f"| {first['params']}, {first['frac_bits']}, {len(first.get('approximate_truncation', []))} of {first.get('truncating_steps', 0)} "
        f"| {med('total_ms'):.0f} ({med('online_ms'):.0f} / {med('offline_ms'):.0f}) "
        f"| {med('total_bytes') / 1e6:.2f} ({med('online_bytes') / 1e6:.2f} / {med('offline_bytes') / 1e6:.2f}) "
        f"| {statistics.median(r['setup_ms'] for r in reports):.0f} / {statistics.median(r['setup_bytes'] for r in reports) / 1e6:.2f} "
        f"| {max(o['float_max_abs_err'] for o in outs):.4f} "
        f"| {sum(o['matches_fixed_reference'] for o in outs)} of {len(outs)} "
        f"| {statistics.median(r['peak_rss_bytes'] for r in reports) / 1e6:.0f} |"
    )
