#!/usr/bin/env python3
"""Summarizes bench/benchmark.py runs of several kernel libraries (the packages that
scripts/package_per_library.sh links, timed in turn with the peers beside): per point, each
library's TFLOP/s in every run, the median's ratio to the first library's and to each
peer's (all the peers' runs pooled).

    scripts/summarize_libraries.py 'RESULTS/bench-{lib}-*.csv' M H2 H3

The pattern names each library's CSV files ({lib} is replaced); the first library is the
base of the ratios.
"""
import collections
import csv
import glob
import math
import statistics
import sys


def main(pattern, libs):
    runs = collections.defaultdict(list)  # (point, lib or peer) -> TFLOP/s of each run
    for lib in libs:
        for path in sorted(glob.glob(pattern.format(lib=lib))):
            for row in csv.DictReader(open(path)):
                point = (row["workload"], row["dtype"], "d" + row["head_dim"],
                         "causal" if row["causal"] == "1" else "full", row["seqlen"])
                try:
                    tflops = float(row["tflops"])
                except ValueError:  # "n/a": a peer that does not support the point
                    continue
                runs[point, lib if row["impl"] == "warpflash" else row["impl"]].append(tflops)
    points = sorted({p for p, _ in runs}, key=lambda p: (p[:4], int(p[4])))
    peers = sorted({n for _, n in runs} - set(libs))
    base = libs[0]
    ratios = collections.defaultdict(list)
    print("point | " + " | ".join(libs + peers) + " | " +
          " | ".join([f"{lib}/{base}" for lib in libs[1:]] + [f"{lib}/{p}" for lib in libs for p in peers]))
    for point in points:
        med = {n: statistics.median(runs[point, n]) for n in libs + peers if runs.get((point, n))}
        cells = ["/".join(f"{x:.0f}" for x in runs.get((point, n), [])) or "-" for n in libs + peers]
        pairs = [(lib, base) for lib in libs[1:]] + [(lib, p) for lib in libs for p in peers]
        shown = []
        for a, b in pairs:
            if a in med and b in med:
                ratios[a, b].append(med[a] / med[b])
                shown.append(f"{med[a] / med[b]:.3f}")
            else:
                shown.append("-")
        print(" ".join(point), "|", " | ".join(cells), "|", " | ".join(shown))
    for (a, b), values in ratios.items():
        print(f"geomean {a}/{b}: {math.exp(sum(map(math.log, values)) / len(values)):.3f} over {len(values)} points")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
