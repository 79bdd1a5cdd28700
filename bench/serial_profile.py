"""Samples of `perf script -F comm,tid,cpu,time,ip,sym` on a 2-core machine taken while
the other core was idle (its nearest sample in time is the idle task), grouped by the
first three functions of helina's crates on the stack: the work that runs alone.

    python3 bench/serial_profile.py perf.txt
"""
import bisect
import collections
import re
import sys

CRATES = r"(ot|protocol|he|kernels|nn|helina|net|gc|cryprot\w*|tfhe\w*|fhe\w*)::"


def load(path):
    samples, cur = [], None
    for line in open(path):
        if line and not line[0].isspace():
            m = re.match(r"(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):", line)
            if m:
                cur = dict(comm=m[1], cpu=int(m[3]), t=float(m[4]), stack=[])
                samples.append(cur)
        elif line.strip() and cur is not None:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                cur["stack"].append(parts[1])
    return samples


def strip(f):
    for _ in range(3):
        f = re.sub(r"<[^<>]*>", "", f)
    return re.sub(r"::h[0-9a-f]{16}$", "", f)


def where(stack):
    frames = [strip(f) for f in stack]
    ours = [f for f in frames if re.match(CRATES, f)]
    return " < ".join(ours[:3]) if ours else (frames[0] if frames else "?")


samples = load(sys.argv[1])
cpus = sorted({s["cpu"] for s in samples})
by = {c: [s for s in samples if s["cpu"] == c] for c in cpus}
times = {c: [s["t"] for s in by[c]] for c in cpus}
idle = lambda s: s["comm"].startswith("swapper")
alone, busy = collections.Counter(), collections.Counter()
n_alone = n_both = 0
for s in samples:
    if idle(s) or len(cpus) != 2:
        continue
    o = cpus[1 - cpus.index(s["cpu"])]
    i = bisect.bisect_left(times[o], s["t"])
    near = [by[o][j] for j in (i - 1, i) if 0 <= j < len(by[o])]
    if not near:
        continue
    other = min(near, key=lambda x: abs(x["t"] - s["t"]))
    k = where(s["stack"])
    busy[k] += 1
    if idle(other):
        alone[k] += 1
        n_alone += 1
    else:
        n_both += 1
n_idle = sum(1 for s in samples if idle(s))
print(f"samples {len(samples)}: idle {n_idle}, running alone {n_alone}, both cores busy {n_both}")
print("| alone | of busy | where (helina's frames, innermost first) |")
print("|---|---|---|")
for k, v in alone.most_common(25):
    print(f"| {v} | {busy[k]} | {k[:200]} |")
