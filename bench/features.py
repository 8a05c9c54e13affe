#!/usr/bin/env python3
"""The forward's features side by side with the peers that support them, in one run:
variable-length batches, sliding windows, softcap and sinks.

Peers, each used where installed and named as skipped where not: FlashAttention-3's
forward (PyPI fa3-fwd: varlen, softcap; no windows in that build) and FlashAttention-4
(PyPI flash-attn-4, its SM90 path: varlen, windows, softcap, sinks).

Workloads (hidden 2048: heads = 2048 / head_dim, BF16):
  varlen   16k tokens in sequences of random length 128..8k (fixed seed), d 64 and 128,
           causal and not; also equal lengths through the varlen entry against the dense one.
  window   seqlen 16k, windows (4096, 0), (1024, 0), (128, 0), d 128: TFLOP/s count the
           visible scores only.
  options  softcap 30 and learnable sinks against the plain kernel at d 128, seqlen 8k.
  headdims d 96, 192 and 192 with d_v 128 (DeepSeek-V3) at seqlen 8k and 16k (or
           --headdim-seqlens), causal and not (heads = 2048 // head_dim); --headdims picks
           some of 96, 192, 192/128.
FLOPs = 2 * visible scores * (head_dim + head_dim_v). Timing: CUDA events, median of --iters launches
after --warmup, the implementations interleaved per configuration, --repeats times.

    python3 bench/features.py --csv features.csv [--sections varlen,window,options,headdims]
"""
import argparse
import csv
import sys

import torch

from bench_common import flash_attention_peers, median, time_ms

HIDDEN = 2048
TOKENS = 16384


def visible_scores(lengths, causal, window_left=-1):
    total = 0
    for n in lengths:
        if window_left >= 0:
            total += sum(min(i + 1, window_left + 1) for i in range(n))
        else:
            total += n * (n + 1) // 2 if causal else n * n
    return total


def random_lengths(seed, tokens=TOKENS, low=128, high=8192):
    generator = torch.Generator().manual_seed(seed)
    lengths = []
    while sum(lengths) < tokens:
        lengths.append(int(torch.randint(low, high + 1, (1,), generator=generator)))
    lengths[-1] -= sum(lengths) - tokens
    if lengths[-1] < low:  # fold a short remainder into the one before
        lengths[-2] += lengths.pop()
    return lengths


def run(args):
    import warpflash

    found, missing = flash_attention_peers()
    for name, why in missing.items():
        print(f"# {name}: skipped: {why}")
    rows = []

    def bench(label, flops, impls):
        """impls: name -> callable; interleaved, repeated; prints TFLOP/s and ratios."""
        results = {name: [] for name in impls}
        for _ in range(args.repeats):
            for name, fn in impls.items():
                try:
                    results[name].append(time_ms(torch, fn, args.warmup, args.iters))
                except Exception as error:  # noqa: BLE001
                    print(f"# {label}: {name} failed: {type(error).__name__}: {error}")
                    results[name] = None
                    break
        ms = {name: median(t) for name, t in results.items() if t}
        line = f"{label:58s}"
        for name, t in ms.items():
            line += f" {name} {flops / t / 1e9:7.1f}"
        best_peer = min((t for name, t in ms.items() if name in ("fa3", "fa4")), default=None)
        if "warpflash" in ms and best_peer:
            line += f"  ratio to the faster of FA3/FA4 {best_peer / ms['warpflash']:.3f}"
        print(line, flush=True)
        for name, t in ms.items():
            rows.append((label, name, t, flops / t / 1e9))
        return ms

    dtype = torch.bfloat16
    sections = set(args.sections.split(","))
    # Variable length.
    for head_dim in (64, 128) if "varlen" in sections else ():
        heads = HIDDEN // head_dim
        for causal in (False, True):
            for kind, lengths in (("random 128..8k", random_lengths(args.seed)), ("equal 2k", [2048] * 8)):
                cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).to(torch.int32)
                q, k, v = (torch.randn(TOKENS, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
                longest = max(lengths)
                flops = 4 * visible_scores(lengths, causal) * head_dim * heads
                impls = {"warpflash": lambda: warpflash.flash_attn_varlen_func(q, k, v, cu, cu, longest, longest,
                                                                               causal=causal)}
                if "fa3" in found:
                    impls["fa3"] = lambda: found["fa3"].flash_attn_varlen_func(q, k, v, cu, cu, longest, longest,
                                                                                causal=causal)
                if "fa4" in found:
                    impls["fa4"] = lambda: found["fa4"].flash_attn_varlen_func(
                        q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest,
                        causal=causal)
                if kind.startswith("equal"):
                    qd, kd, vd = (t.view(len(lengths), lengths[0], heads, head_dim) for t in (q, k, v))
                    impls["dense"] = lambda: warpflash.flash_attn_func(qd, kd, vd, causal=causal)
                bench(f"varlen {kind} d{head_dim} {'causal' if causal else 'full'} ({len(lengths)} seqs)", flops,
                      impls)

    # Sliding window against the causal kernel of the same size.
    head_dim, heads, seqlen = 128, 16, 16384
    if "window" in sections:
        window_section(q_shape=(1, seqlen, heads, head_dim), bench=bench, found=found)
    if "options" in sections:
        options_section(heads, head_dim, bench=bench, found=found)
    if "headdims" in sections:
        head_dims_section(bench=bench, found=found, pairs=args.headdims, seqlens=args.headdim_seqlens)

    if args.csv:
        with open(args.csv, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["config", "impl", "ms_median", "tflops"])
            for label, name, ms, tf in rows:
                writer.writerow([label, name, f"{ms:.5f}", f"{tf:.1f}"])


def window_section(q_shape, bench, found):
    import warpflash

    dtype = torch.bfloat16
    _, seqlen, heads, head_dim = q_shape
    q, k, v = (torch.randn(q_shape, device="cuda", dtype=dtype) for _ in range(3))
    # Mistral's and Gemma's 4096, gpt-oss's 128.
    for window in (4096, 1024, 128):
        flops = 4 * visible_scores([seqlen], True, window) * head_dim * heads
        impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=True, window_size=(window, -1))}
        if "fa4" in found:
            impls["fa4"] = lambda: found["fa4"].flash_attn_func(q, k, v, causal=True, window_size=(window, 0))
        bench(f"window ({window}, 0) 16k d128", flops, impls)
    impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=True)}
    if "fa4" in found:
        impls["fa4"] = lambda: found["fa4"].flash_attn_func(q, k, v, causal=True)
    bench("causal 16k d128 (every block of the causal mask)", 4 * visible_scores([seqlen], True) * head_dim * heads,
          impls)



def options_section(heads, head_dim, bench, found):
    """Softcap and sinks against the plain kernel."""
    import warpflash

    dtype = torch.bfloat16
    seqlen, batch = 8192, 2
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
    sink = torch.randn(heads, device="cuda")
    for causal in (False, True):
        flops = batch * 4 * visible_scores([seqlen], causal) * head_dim * heads
        impls = {
            "plain": lambda: warpflash.flash_attn_func(q, k, v, causal=causal),
            "softcap": lambda: warpflash.flash_attn_func(q, k, v, causal=causal, softcap=30.0),
            "sinks": lambda: warpflash.flash_attn_func(q, k, v, causal=causal, learnable_sink=sink),
        }
        if "fa3" in found:
            impls["fa3"] = lambda: found["fa3"].flash_attn_func(q, k, v, causal=causal)
            impls["fa3_softcap"] = lambda: found["fa3"].flash_attn_func(q, k, v, causal=causal, softcap=30.0)
        if "fa4" in found:
            impls["fa4"] = lambda: found["fa4"].flash_attn_func(q, k, v, causal=causal)
            impls["fa4_softcap"] = lambda: found["fa4"].flash_attn_func(q, k, v, causal=causal, softcap=30.0)
        bench(f"options 8k d128 {'causal' if causal else 'full'}", flops, impls)


def head_dims_section(bench, found, pairs, seqlens):
    """The head dims of Phi (96) and DeepSeek-V3's prefill (192, with d_v 128)."""
    import warpflash

    dtype = torch.bfloat16
    for head_dim, head_dim_v in pairs:
        heads = HIDDEN // head_dim
        for seqlen in seqlens:
            batch = TOKENS // seqlen
            q, k = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype) for _ in range(2))
            v = torch.randn(batch, seqlen, heads, head_dim_v, device="cuda", dtype=dtype)
            for causal in (False, True):
                flops = batch * 2 * visible_scores([seqlen], causal) * (head_dim + head_dim_v) * heads
                impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=causal)}
                if "fa3" in found:
                    impls["fa3"] = lambda: found["fa3"].flash_attn_func(q, k, v, causal=causal)
                if "fa4" in found:
                    impls["fa4"] = lambda: found["fa4"].flash_attn_func(q, k, v, causal=causal)
                dims = f"d{head_dim}" + (f"/{head_dim_v}" if head_dim_v != head_dim else "")
                bench(f"headdims {dims} {seqlen // 1024}k {'causal' if causal else 'full'} (batch {batch}, "
                      f"heads {heads})", flops, impls)


def head_dim_pairs(text):
    """'96,192/128' -> [(96, 96), (192, 128)]."""
    pairs = []
    for item in text.split(","):
        d, _, d_v = item.partition("/")
        pairs.append((int(d), int(d_v or d)))
    return pairs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--csv")
    p.add_argument("--sections", default="varlen,window,options,headdims",
                   help="comma-separated: varlen, window, options, headdims")
    p.add_argument("--headdims", type=head_dim_pairs, default=[(96, 96), (192, 192), (192, 128)],
                   help="the headdims section's head dims, comma-separated, d or d/d_v; default 96,192,192/128")
    p.add_argument("--headdim-seqlens", type=lambda s: [int(x) for x in s.split(",")], default=[8192, 16384],
                   help="the headdims section's sequence lengths (batch = 16k tokens / seqlen); default 8192,16384")
    run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
