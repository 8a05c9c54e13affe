#!/usr/bin/env python3
"""Plots TFLOP/s against seqlen from the benchmark CSVs, like the FlashAttention-3 paper's
figures: one panel per (head dim, mask), one line per implementation, one figure per dtype.

    python3 bench/plot_results.py --warpflash wf.csv --sdpa sdpa.csv --out-dir plots/
"""
import argparse
import csv
import os
from collections import defaultdict


def read_rows(path, impl=None):
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            yield (impl or row["impl"], row["dtype"], int(row["head_dim"]), int(row["causal"]),
                   int(row["seqlen"]), float(row["tflops"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warpflash", required=True, help="CSV of build/bench/warpflash_bench")
    parser.add_argument("--sdpa", help="CSV of bench/sdpa_baseline.py (cudnn, fa2 rows)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--title", default="", help="appended to each figure title (GPU, date)")
    args = parser.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # series[dtype][(head_dim, causal)][impl] = [(seqlen, tflops)]
    series = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    rows = list(read_rows(args.warpflash, impl="warpflash"))
    if args.sdpa:
        rows += [r for r in read_rows(args.sdpa) if r[5] == r[5]]  # drop NaN (n/a)
    for impl, dtype, head_dim, causal, seqlen, tflops in rows:
        series[dtype][(head_dim, causal)][impl].append((seqlen, tflops))

    os.makedirs(args.out_dir, exist_ok=True)
    styles = {"warpflash": ("tab:red", "o"), "cudnn": ("tab:green", "s"), "fa2": ("tab:blue", "^")}
    for dtype, panels in sorted(series.items()):
        keys = sorted(panels)
        head_dims = sorted({k[0] for k in keys})
        fig, axes = plt.subplots(2, len(head_dims), figsize=(4.2 * len(head_dims), 7), squeeze=False)
        for col, head_dim in enumerate(head_dims):
            for row, causal in enumerate((0, 1)):
                ax = axes[row][col]
                for impl, points in sorted(panels.get((head_dim, causal), {}).items()):
                    points.sort()
                    color, marker = styles.get(impl, ("gray", "x"))
                    ax.plot([p[0] for p in points], [p[1] for p in points], label=impl, color=color, marker=marker)
                ax.set_xscale("log", base=2)
                ax.set_title(f"d={head_dim}, {'causal' if causal else 'non-causal'}")
                ax.set_xlabel("seqlen (16k tokens per batch)")
                ax.set_ylabel("TFLOP/s")
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=8)
        fig.suptitle(f"Attention forward, {dtype}{' — ' + args.title if args.title else ''}")
        fig.tight_layout()
        path = os.path.join(args.out_dir, f"forward_{dtype}.png")
        fig.savefig(path, dpi=90)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
