#!/usr/bin/env python3
"""Plots TFLOP/s against seqlen from the benchmark CSVs, like the FlashAttention-3 paper's
figures: one panel per (head dim, mask), one line per implementation, one figure per dtype.

    python3 bench/plot_results.py --warpflash wf.csv --sdpa sdpa.csv --out-dir plots/
    python3 bench/plot_results.py --results python.csv --out-dir plots/   # bench/benchmark.py's
    python3 bench/plot_results.py --features features.csv --out-dir plots/  # bench/features.py's

bench/benchmark.py calls plot_tflops() directly with its own rows.
"""
import argparse
import csv
import math
import os
from collections import defaultdict

STYLES = {"warpflash": ("tab:red", "o"), "cudnn": ("tab:green", "s"), "fa2": ("tab:blue", "^"),
          "flex": ("tab:purple", "D"), "fa3": ("tab:orange", "v"), "fa4": ("tab:brown", "P")}
LABELS = {"warpflash": "warpflash", "cudnn": "cuDNN", "fa2": "FA2 (SDPA flash)",
          "flex": "FlexAttention", "fa3": "FA3 (fa3-fwd)", "fa4": "FA4 (flash-attn-4)"}


def read_rows(path, impl=None):
    """(impl, dtype, head_dim, causal, seqlen, tflops) per measured row of the paper grid; rows
    whose TFLOP/s is not a number (n/a: the backend refused) or of another workload (a
    bench/benchmark.py CSV has model shapes too) are left out."""
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("workload", "paper") != "paper":
                continue
            try:
                tflops = float(row["tflops"])
            except ValueError:
                continue
            if math.isfinite(tflops):
                yield (impl or row["impl"], row["dtype"], int(row["head_dim"]), int(row["causal"]),
                       int(row["seqlen"]), tflops)


def plot_tflops(rows, out_dir, title="", xlabel="seqlen (16k tokens per batch)"):
    """Writes forward_<dtype>.png into out_dir from (impl, dtype, head_dim, causal, seqlen,
    tflops) tuples; returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # series[dtype][(head_dim, causal)][impl] = [(seqlen, tflops)]
    series = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for impl, dtype, head_dim, causal, seqlen, tflops in rows:
        series[dtype][(int(head_dim), int(causal))][impl].append((seqlen, tflops))

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for dtype, panels in sorted(series.items()):
        head_dims = sorted({k[0] for k in panels})
        masks = sorted({k[1] for k in panels})
        fig, axes = plt.subplots(len(masks), len(head_dims),
                                 figsize=(4.2 * len(head_dims), 3.5 * len(masks)), squeeze=False)
        for col, head_dim in enumerate(head_dims):
            for row, causal in enumerate(masks):
                ax = axes[row][col]
                for impl, points in sorted(panels.get((head_dim, causal), {}).items()):
                    points.sort()
                    color, marker = STYLES.get(impl, ("gray", "x"))
                    ax.plot([p[0] for p in points], [p[1] for p in points],
                            label=LABELS.get(impl, impl), color=color, marker=marker)
                ax.set_xscale("log", base=2)
                seqlens = sorted({p[0] for points in panels.get((head_dim, causal), {}).values()
                                  for p in points})
                ax.set_xticks(seqlens, [f"{s // 1024}k" if s >= 1024 else str(s) for s in seqlens])
                ax.minorticks_off()
                ax.set_title(f"d={head_dim}, {'causal' if causal else 'non-causal'}")
                ax.set_xlabel(xlabel)
                ax.set_ylabel("TFLOP/s")
                ax.grid(True, alpha=0.3)
                if ax.lines:
                    ax.legend(fontsize=8)
        fig.suptitle(f"Attention forward, {dtype}{' — ' + title if title else ''}")
        fig.tight_layout()
        path = os.path.join(out_dir, f"forward_{dtype}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_features(path, out_dir):
    """Writes features.png into out_dir from a bench/features.py CSV (config, impl,
    ms_median, tflops): one group of horizontal bars per configuration, one bar per
    implementation; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs, impls, tflops = [], [], {}
    with open(path, newline="") as f:
        for fields in list(csv.reader(f))[1:]:
            # Older CSVs left commas inside the config unquoted: the last three fields are
            # impl, ms_median, tflops.
            config, impl, value = ",".join(fields[:-3]), fields[-3], float(fields[-1])
            if config not in configs:
                configs.append(config)
            if impl not in impls:
                impls.append(impl)
            tflops[(config, impl)] = value
    height = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(9, 0.25 * len(configs) * len(impls) + 1.5))
    # Variants (dense, plain, softcap, ...) get colours that no implementation has.
    used = {color for color, _ in STYLES.values()}
    others = iter([c for c in ("tab:pink", "tab:gray", "tab:olive", "tab:cyan", "black", "gold", "tab:purple")
                   if c not in used])
    for i, impl in enumerate(impls):
        measured = [(c, tflops[(config, impl)]) for c, config in enumerate(configs) if (config, impl) in tflops]
        color = STYLES[impl][0] if impl in STYLES else next(others, "gray")
        ax.barh([c - 0.4 + (i + 0.5) * height for c, _ in measured], [v for _, v in measured], height,
                label=LABELS.get(impl, impl), color=color)
    ax.set_yticks(range(len(configs)), configs, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOP/s (visible scores)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "features.png")
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warpflash", help="CSV of build/bench/warpflash_bench")
    parser.add_argument("--sdpa", help="CSV of bench/sdpa_baseline.py (cudnn, fa2 rows)")
    parser.add_argument("--results", help="CSV of bench/benchmark.py (all implementations)")
    parser.add_argument("--features", help="CSV of bench/features.py (a bar chart)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--title", default="", help="appended to each figure title (GPU, date)")
    args = parser.parse_args(argv)
    if args.features:
        print(f"wrote {plot_features(args.features, args.out_dir)}")
    if not (args.warpflash or args.results):
        if args.features:
            return
        parser.error("give --warpflash, --results or --features")

    rows = list(read_rows(args.warpflash, impl="warpflash")) if args.warpflash else []
    for path in (args.sdpa, args.results):
        if path:
            rows += list(read_rows(path))
    for path in plot_tflops(rows, args.out_dir, args.title):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
