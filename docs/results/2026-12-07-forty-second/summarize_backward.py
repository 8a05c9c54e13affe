"""Backward C++ benchmark logs (warpflash_bench --backward, '== LIB pass N' headers):
median TFLOP/s per library and point over the passes, and the ratios to M.
    python3 summarize_backward.py LOG...
"""
import statistics
import sys
from collections import defaultdict

values = defaultdict(list)  # (lib, d, causal, seqlen) -> [TFLOP/s]
for path in sys.argv[1:]:
    lib = None
    for line in open(path):
        if line.startswith("=="):
            lib = line.split()[1]
        elif line.startswith(("bf16", "fp16")) and lib:
            f = line.split()
            values[(lib, int(f[1]), int(f[2]), int(f[3]))].append(float(f[-1]))
libs = sorted({k[0] for k in values})
points = sorted({k[1:] for k in values})
print("d causal seqlen | " + " | ".join(f"{lib} (median, n)" for lib in libs) + " | " +
      " | ".join(f"{lib}/M" for lib in libs if lib != "M"))
ratios = defaultdict(list)
for p in points:
    med = {lib: statistics.median(values[(lib,) + p]) for lib in libs}
    cells = [f"{med[lib]:.1f} ({min(values[(lib,) + p]):.0f}-{max(values[(lib,) + p]):.0f}, {len(values[(lib,) + p])})"
             for lib in libs]
    rs = []
    for lib in libs:
        if lib != "M":
            ratios[(lib, p[1])].append(med[lib] / med["M"])
            rs.append(f"{med[lib] / med['M']:.3f}")
    print(f"{p[0]} {p[1]} {p[2]} | " + " | ".join(cells) + " | " + " | ".join(rs))
for (lib, causal), rs in sorted(ratios.items()):
    print(f"geomean {lib}/M causal={causal}: {statistics.geometric_mean(rs):.4f}")
