#!/usr/bin/env python3
"""Times PyTorch SDPA's cuDNN and flash (FA2) backends on warpflash_bench's grid.

Same workload, FLOP formula and timing method as bench/bench_forward.cpp: 16k tokens
(batch = 16384 / seqlen), hidden 2048 (heads = 2048 / head_dim), FLOPs = 4*b*h*s^2*d,
halved when causal; warm-up launches, then one CUDA-event pair per launch, median.
(triton.testing.do_bench would flush the L2 before every launch, which the C++ bench
does not; timing both the same way keeps the ratios like for like.)

Run it right after warpflash_bench on the same machine, since speed claims are ratios to
peers measured in the same run:

    build/bench/warpflash_bench --csv wf.csv
    python3 bench/sdpa_baseline.py --csv sdpa.csv --warpflash-csv wf.csv
"""

import argparse
import csv
import itertools
import sys

from bench_common import (HIDDEN, attention_flops, batch_for, call_sdpa, causal_values, cell, collect_rows,
                          dtype_list, geomean, int_list, number_or_none, positive_int, ratio,
                          tflops, time_ms)

IMPLS = ("cudnn", "fa2")
IMPL_TITLES = {"cudnn": "cuDNN", "fa2": "FA2"}
CSV_COLUMNS = ("impl", "dtype", "head_dim", "causal", "seqlen", "batch", "heads", "ms_median",
               "tflops")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", help="write results here (" + ",".join(CSV_COLUMNS) + ")")
    parser.add_argument("--dtypes", type=dtype_list, default=["bf16", "fp16"])
    parser.add_argument("--head-dims", type=int_list, default=[64, 128, 256])
    parser.add_argument("--seqlens", type=int_list, default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--causal", choices=["both", "0", "1"], default="both")
    parser.add_argument("--iters", type=positive_int, default=100,
                        help="timed launches per configuration")
    parser.add_argument("--warmup", type=positive_int, default=10,
                        help="untimed launches before them")
    parser.add_argument("--warpflash-csv",
                        help="warpflash_bench's CSV: print a combined table with ratios")
    return parser.parse_args(argv)


def time_backend(torch, impl, q, k, v, causal, warmup, iters):
    """Returns (ms, None), or (None, reason) when the backend refuses or fails."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    return call_sdpa(impl, lambda: time_ms(torch, lambda: sdpa(q, k, v, is_causal=causal),
                                           warmup, iters))


def measure(args):
    """Yields one result row per (config, backend), printing each as it comes."""
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device visible to PyTorch")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    print(f"{'impl':<6} {'dtype':<5} {'hdim':>5} {'causal':>6} {'seqlen':>7} {'batch':>6} "
          f"{'heads':>6} {'ms_median':>10} {'TFLOP/s':>8}")
    grid = itertools.product(args.dtypes, args.head_dims, causal_values(args.causal), args.seqlens)
    for dtype, head_dim, causal, seqlen in grid:
        batch, heads = batch_for(seqlen), HIDDEN // head_dim
        # Models hold (batch, seqlen, heads, head_dim); SDPA takes the transposed view.
        q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtypes[dtype])
                   .transpose(1, 2) for _ in range(3))
        for impl in IMPLS:
            ms, reason = time_backend(torch, impl, q, k, v, causal, args.warmup, args.iters)
            flops = attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
            tf = tflops(flops, ms) if ms is not None else None
            result = f"{cell(ms, 10, 4)} {cell(tf, 8, 1)}" + (f"  ({reason})" if reason else "")
            print(f"{impl:<6} {dtype:<5} {head_dim:>5} {int(causal):>6} {seqlen:>7} {batch:>6} "
                  f"{heads:>6} {result}", flush=True)
            yield dict(impl=impl, dtype=dtype, head_dim=head_dim, causal=int(causal),
                       seqlen=seqlen, batch=batch, heads=heads, ms_median=ms, tflops=tf)
        del q, k, v  # free them before the next config allocates its own


def csv_row(row):
    """A result row as the CSV holds it: n/a where the backend failed."""
    ms, tf = row["ms_median"], row["tflops"]
    return dict(row, ms_median="n/a" if ms is None else f"{ms:.6f}",
                tflops="n/a" if tf is None else f"{tf:.3f}")


def config_key(row):
    return (row["dtype"], int(row["head_dim"]), int(row["causal"]), int(row["seqlen"]))


def read_warpflash_csv(path):
    """{(dtype, head_dim, causal, seqlen): TFLOP/s} from warpflash_bench's CSV."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"dtype", "head_dim", "causal", "seqlen", "tflops"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        return {config_key(row): number_or_none(row["tflops"]) for row in reader}


def combined_table(warpflash, rows):
    """Lines of a table with TFLOP/s of warpflash and the baselines, ratios and their geomeans."""
    baseline = {(row["impl"],) + config_key(row): number_or_none(row["tflops"]) for row in rows}
    keys = sorted(set(warpflash) | {key[1:] for key in baseline})
    title = " ".join(f"{IMPL_TITLES[i]:>8}" for i in IMPLS)
    ratios_title = " ".join(f"{'wf/' + IMPL_TITLES[i]:>9}" for i in IMPLS)
    lines = [f"{'dtype':<5} {'hdim':>5} {'causal':>6} {'seqlen':>7} | {'warpflash':>9} {title} | "
             + ratios_title]
    ratios = {impl: [] for impl in IMPLS}
    for key in keys:
        wf = warpflash.get(key)
        peers = [baseline.get((impl,) + key) for impl in IMPLS]
        key_ratios = [ratio(wf, peer) for peer in peers]
        for impl, r in zip(IMPLS, key_ratios):
            if r is not None:
                ratios[impl].append(r)
        dtype, head_dim, causal, seqlen = key
        lines.append(f"{dtype:<5} {head_dim:>5} {causal:>6} {seqlen:>7} | {cell(wf, 9, 1)} "
                     + " ".join(cell(p, 8, 1) for p in peers) + " | "
                     + " ".join(cell(r, 9, 3) for r in key_ratios))
    for impl in IMPLS:
        g = geomean(ratios[impl])
        count = len(ratios[impl])
        summary = f"{g:.3f} over {count} configs" if g is not None else "n/a (no config with both)"
        lines.append(f"geomean warpflash/{IMPL_TITLES[impl]}: {summary}")
    return lines


def main(argv=None):
    args = parse_args(argv)
    # Both files are opened first, so a bad path fails before minutes of measuring.
    try:
        warpflash = read_warpflash_csv(args.warpflash_csv) if args.warpflash_csv else None
        out = open(args.csv, "w", newline="") if args.csv else None
    except (OSError, ValueError) as error:
        sys.exit(f"error: {error}")
    rows = collect_rows(measure(args), out, CSV_COLUMNS, csv_row)
    if warpflash is not None:
        print()
        print("\n".join(combined_table(warpflash, rows)))


if __name__ == "__main__":
    main()
