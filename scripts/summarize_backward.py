"""Backward C++ benchmark logs (warpflash_bench --backward, '== LIB pass N' headers):
median TFLOP/s per library and point over the passes, and each library's ratio to a base.
    python3 scripts/summarize_backward.py BASE LOG...
"""
import statistics
import sys
from collections import defaultdict

base, paths = sys.argv[1], sys.argv[2:]
values = defaultdict(list)  # (lib, d, causal, seqlen) -> [TFLOP/s]
for path in paths:
    lib = None
    for line in open(path):
        if line.startswith("=="):
            lib = line.split()[1]
        elif line.startswith(("bf16", "fp16")) and lib:
            f = line.split()
            values[(lib, int(f[1]), int(f[2]), int(f[3]))].append(float(f[-1]))
libs = sorted({k[0] for k in values})
others = [lib for lib in libs if lib != base]
points = sorted({k[1:] for k in values})
print("d causal seqlen | " + " | ".join(f"{lib} (median, min-max, n)" for lib in libs) + " | " +
      " | ".join(f"{lib}/{base}" for lib in others))
ratios = defaultdict(list)
for p in points:
    med = {lib: statistics.median(values[(lib,) + p]) for lib in libs}
    cells = [f"{med[lib]:.1f} ({min(values[(lib,) + p]):.0f}-{max(values[(lib,) + p]):.0f}, {len(values[(lib,) + p])})"
             for lib in libs]
    for lib in others:
        ratios[(lib, p[1])].append(med[lib] / med[base])
    print(f"{p[0]} {p[1]} {p[2]} | " + " | ".join(cells) + " | " +
          " | ".join(f"{med[lib] / med[base]:.3f}" for lib in others))
for (lib, causal), rs in sorted(ratios.items()):
    print(f"geomean {lib}/{base} causal={causal}: {statistics.geometric_mean(rs):.4f}")
