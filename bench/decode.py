#!/usr/bin/env python3
"""KV-cache attention (serving) side by side with the peers, in one run: decode with one
query token per sequence, speculative decoding (4 tokens) and chunked prefill, over full
caches (cache_seqlens = the cache length), BF16: GQA 32/8 at head dim 128, and MQA 64/1,
head dims 64 and 256; then paged caches (random page tables, page sizes 1 to 256) of
two of those shapes against the same cache contiguous and the peers' paged calls.

Peers, each used where installed and named as skipped where not: FlashAttention-3's
flash_attn_with_kvcache (PyPI fa3-fwd; its own choice of splits and GQA packing), cuDNN
through PyTorch's SDPA (enable_gqa; one query token only: SDPA's causal mask is
top-left aligned, so with several query tokens it is not the same problem), and
FlashAttention-4 (flash-attn-4: flash_attn_varlen_func over the dense or paged cache with
seqused_k; its SM90 path has no split-KV) when importable.

Reported: microseconds per call and the KV cache read rate (bytes of K and V / time),
the median of --iters launches between CUDA events after --warmup, the implementations
interleaved per configuration, --repeats times (the median of the repeats).

With --splits 1,2,4,...: for each contiguous shape, warpflash with num_splits = 0 (its own
choice) against each fixed split, interleaved, and the ratio of the automatic choice to
the best fixed one (issue 17's bar: at most 1.03). Then decode with the new token appended
with rotary (the first shape, contiguous and paged 16) against the same decode over a cache
that already holds it (issue 17's bar: at most 1.10).

With --bandwidth: decode (q=1, GQA 32/8, d 128) over KV lengths 512 to 128k at 128k cached
tokens per call (batch 256 to 1: the cache, 512 MiB, never fits in L2), against a
device-to-device copy of 1 GiB (its read + write rate) measured in the same run; with
--plot, the KV read rate against the KV length as a PNG. With --batches: only decode kv 8k
at those batch sizes (how the tile count against the SM count moves the ratio); with
--splits too, each batch also with those fixed num_splits.

    python3 bench/decode.py [--csv decode.csv] [--repeats 3] [--page-sizes 1,16,64,256] [--paged-only]
                            [--match 'd 64'] [--splits 1,2,4,8,16,32] [--bandwidth [--plot bw.png]]
                            [--batches 31,32,33]
"""
import argparse
import csv
import sys

import torch

from bench_common import flash_attention_peers, median, time_ms

# (label, batch, query tokens, cache length, causal, heads_q, heads_kv, head_dim): issue 17's
# shapes (GQA 32/8, d 128), then its bar's MQA and head-dim variants.
SHAPES = [
    ("decode q=1, batch 32, kv 8k", 32, 1, 8192, True, 32, 8, 128),
    ("decode q=1, batch 8, kv 32k", 8, 1, 32768, True, 32, 8, 128),
    ("decode q=1, batch 1, kv 128k", 1, 1, 131072, True, 32, 8, 128),
    ("decode q=1, batch 64, kv 2k", 64, 1, 2048, True, 32, 8, 128),
    ("q=4 (speculative), batch 32, kv 8k", 32, 4, 8192, True, 32, 8, 128),
    ("chunked prefill q 512, kv 16k, batch 4", 4, 512, 16384, True, 32, 8, 128),
    ("decode q=1, MQA 64/1, batch 64, kv 4k", 64, 1, 4096, True, 64, 1, 128),
    ("decode q=1, d 64, batch 32, kv 8k", 32, 1, 8192, True, 32, 8, 64),
    ("decode q=1, d 256, batch 32, kv 8k", 32, 1, 8192, True, 32, 8, 256),
]


# Paged: the shapes with page sizes of vLLM (16), SGLang/FlashInfer (1, 64) and large pages.
PAGED_SHAPES = [SHAPES[0], SHAPES[5]]
PAGE_SIZES = [1, 16, 64, 256]

# The bandwidth sweep: KV lengths at a fixed number of cached tokens per call.
BANDWIDTH_KV = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
BANDWIDTH_TOKENS = 131072


def paged(cache, page_size):
    """The cache (batch, seqlen, heads, d) as pages (num_pages, page_size, heads, d) in a
    random order (the same for every cache of that shape: K's table serves V), and its page
    table int32 (batch, max_pages)."""
    batch, seqlen = cache.shape[:2]
    max_pages = -(-seqlen // page_size)
    order = torch.randperm(batch * max_pages, generator=torch.Generator().manual_seed(0)).to(cache.device)
    padded = torch.zeros(batch, max_pages * page_size, *cache.shape[2:], dtype=cache.dtype, device=cache.device)
    padded[:, :seqlen] = cache
    pages = torch.empty(batch * max_pages, page_size, *cache.shape[2:], dtype=cache.dtype, device=cache.device)
    pages[order] = padded.view(batch * max_pages, page_size, *cache.shape[2:])
    return pages, order.view(batch, max_pages).to(torch.int32)


def cache_bytes(batch, seqlen_k, heads_kv, head_dim):
    """The bytes of K and V (BF16) that one call reads."""
    return 2 * batch * seqlen_k * heads_kv * head_dim * 2


def fixed_split_impls(splits, q, k_cache, v_cache, cache_seqlens, causal):
    """warpflash's decode with each fixed num_splits of the comma-separated `splits`."""
    from warpflash import flash_attn_with_kvcache
    return {f"splits={n}": (lambda n=n: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens,
                                                                causal=causal, num_splits=n))
            for n in map(int, filter(None, splits.split(",")))}


def measure(label, impls, kv_bytes, args, rows, kv_len=""):
    """Times impls (name -> call) interleaved, after checking each against the first."""
    # Every implementation's output against warpflash's once (and a first call: FA4 compiles).
    first = next(iter(impls))
    reference = impls[first]()
    for name in list(impls):
        if name == "warpflash-without-leftpad":  # attends to the padding too: another result
            continue
        try:
            out = impls[name]()
            out = out[0] if isinstance(out, tuple) else out
            if name == "cudnn":
                out = out.transpose(1, 2)
            error = (out.float() - reference.float()).abs().max().item()
            if error > 2e-2:
                print(f"# {label}: {name} differs from {first} by {error:.3g}; dropped")
                del impls[name]
        except Exception as error:  # noqa: BLE001
            print(f"# {label}: {name} failed ({type(error).__name__}: {str(error)[:200]}); dropped")
            del impls[name]
    times = {name: [] for name in impls}
    for _ in range(args.repeats):
        for name, fn in impls.items():
            times[name].append(time_ms(torch, fn, args.warmup, args.iters))
    best_peer = min((median(t) for name, t in times.items() if not name.startswith(("warpflash", "splits="))),
                    default=None)
    cells = []
    for name, t in times.items():
        us = median(t) * 1e3
        rows.append({"shape": label, "impl": name, "kv_len": kv_len, "us": f"{us:.1f}",
                     "kv_TB_per_s": f"{kv_bytes / us / 1e6:.2f}", "us_repeats": " ".join(f"{x * 1e3:.1f}" for x in t)})
        cells.append(f"{name} {us:7.1f} us ({kv_bytes / us / 1e6:.2f} TB/s)")
    ratio = f"  warpflash / fastest peer time: {median(times[first]) / best_peer:.2f}" if best_peer else ""
    fixed = [median(t) for name, t in times.items() if name.startswith("splits=")]
    if fixed:
        ratio += f"  num_splits=0 / best fixed: {median(times[first]) / min(fixed):.3f}"
    if "warpflash-without-append" in times:
        ratio += f"  append / without: {median(times[first]) / median(times['warpflash-without-append']):.3f}"
    if "warpflash-without-leftpad" in times:
        ratio += f"  leftpad / without: {median(times[first]) / median(times['warpflash-without-leftpad']):.3f}"
    if "warpflash-contiguous" in times:
        ratio += f"  paged / contiguous: {median(times[first]) / median(times['warpflash-contiguous']):.2f}"
    print(f"{label:42s} " + " | ".join(cells) + ratio)


def decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim):
    """q, full k and v caches (bfloat16, seed 0) and their cache_seqlens (all seqlen_k)."""
    torch.manual_seed(0)
    q = torch.randn(batch, seqlen_q, heads_q, head_dim, device="cuda", dtype=torch.bfloat16)
    k_cache = torch.randn(batch, seqlen_k, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    cache_seqlens = torch.full((batch,), seqlen_k, dtype=torch.int32, device="cuda")
    return q, k_cache, v_cache, cache_seqlens


def contiguous_impls(found, q, k_cache, v_cache, cache_seqlens, causal):
    """name -> call of decode over full contiguous caches: warpflash, then the peers found
    (cuDNN for one query token only: SDPA's causal mask is top-left aligned)."""
    from warpflash import flash_attn_with_kvcache

    impls = {"warpflash": lambda: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens,
                                                          causal=causal)}
    if "fa3" in found:
        fa3 = found["fa3"]
        impls["fa3"] = lambda: fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens,
                                                           causal=causal)
    if "fa4" in found:  # its varlen call takes dense tensors with seqused_k (no split-KV on SM90)
        fa4 = found["fa4"]
        impls["fa4"] = lambda: fa4.flash_attn_varlen_func(q, k_cache, v_cache, seqused_k=cache_seqlens,
                                                          causal=causal)
    if q.shape[1] == 1:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q_t, k_t, v_t = (x.transpose(1, 2) for x in (q, k_cache, v_cache))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q_t, k_t, v_t, enable_gqa=True)
        impls["cudnn"] = cudnn
    return impls


def bandwidth_sweep(found, args, rows):
    """Decode over BANDWIDTH_KV lengths at BANDWIDTH_TOKENS cached tokens per call, then the
    copy rate of the same GPU; returns it (TB/s)."""
    heads_q, heads_kv, head_dim = 32, 8, 128
    for seqlen_k in BANDWIDTH_KV:
        batch = BANDWIDTH_TOKENS // seqlen_k
        q, k_cache, v_cache, cache_seqlens = decode_tensors(batch, 1, seqlen_k, heads_q, heads_kv, head_dim)
        impls = contiguous_impls(found, q, k_cache, v_cache, cache_seqlens, True)
        measure(f"bandwidth: decode q=1, batch {batch}, kv {seqlen_k}", impls,
                cache_bytes(batch, seqlen_k, heads_kv, head_dim), args, rows, kv_len=seqlen_k)
        del q, k_cache, v_cache, impls
    source = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    copy = median([time_ms(torch, lambda: target.copy_(source), args.warmup, args.iters)
                   for _ in range(args.repeats)])
    rate = 2 * source.numel() / (copy * 1e-3) / 1e12
    rows.append({"shape": "device-to-device copy, 1 GiB", "impl": "copy", "kv_len": "", "us": f"{copy * 1e3:.1f}",
                 "kv_TB_per_s": f"{rate:.2f}", "us_repeats": ""})
    print(f"device-to-device copy of 1 GiB: {copy * 1e3:.1f} us, {rate:.2f} TB/s (read + write)")
    return rate


def plot_bandwidth(rows, copy_rate, path):
    """KV read rate against KV length, one line per implementation, the copy rate and 92%
    of it (issue 17's bar) as dashed lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plot_results import LABELS, STYLES
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for impl in dict.fromkeys(row["impl"] for row in rows if row["kv_len"] != ""):
        points = [(int(row["kv_len"]), float(row["kv_TB_per_s"])) for row in rows
                  if row["impl"] == impl and row["kv_len"] != ""]
        color, marker = STYLES.get(impl, ("gray", "x"))
        ax.plot(*zip(*points), label=LABELS.get(impl, impl), color=color, marker=marker)
    ax.axhline(copy_rate, color="black", linestyle="--", linewidth=1, label=f"copy rate {copy_rate:.2f} TB/s")
    ax.axhline(0.92 * copy_rate, color="gray", linestyle=":", linewidth=1, label="92% of the copy rate")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"KV length ({BANDWIDTH_TOKENS // 1024}k cached tokens per call)")
    ax.set_ylabel("KV cache read rate (TB/s)")
    ax.set_title(f"Decode, BF16, GQA 32/8, d 128, causal: {torch.cuda.get_device_name()}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--page-sizes", default=",".join(map(str, PAGE_SIZES)),
                        help="comma-separated page sizes of the paged points")
    parser.add_argument("--paged-only", action="store_true", help="skip the contiguous shapes")
    parser.add_argument("--match", default="", help="only the shapes whose label contains this")
    parser.add_argument("--splits", default="",
                        help="comma-separated fixed num_splits to time against num_splits=0 (contiguous shapes)")
    parser.add_argument("--bandwidth", action="store_true",
                        help="only the sweep of KV lengths against the copy rate")
    parser.add_argument("--plot", help="with --bandwidth: write the plot here (PNG)")
    parser.add_argument("--batches", default="",
                        help="only decode q=1 kv 8k (GQA 32/8, d 128) at these comma-separated batch sizes: "
                             "8 tiles each, so 33 fills two rounds of 132 SMs exactly and 32 leaves 8 slots idle")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()

    from warpflash import apply_rotary, flash_attn_with_kvcache

    found, missing = flash_attention_peers()
    for name, why in missing.items():
        print(f"# {name}: skipped: {why}")
    print(f"# {torch.cuda.get_device_name()}, bfloat16, full caches; "
          f"median of {args.repeats} repeats of the median of {args.iters} launches (CUDA events)")
    rows = []
    if args.bandwidth:
        copy_rate = bandwidth_sweep(found, args, rows)
        if args.plot:
            plot_bandwidth(rows, copy_rate, args.plot)
        write_csv(args.csv, rows)
        return 0
    if args.batches:
        _, _, seqlen_q, seqlen_k, causal, heads_q, heads_kv, head_dim = SHAPES[0]
        for batch in map(int, args.batches.split(",")):
            q, k_cache, v_cache, cache_seqlens = decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
            impls = contiguous_impls(found, q, k_cache, v_cache, cache_seqlens, causal)
            impls.update(fixed_split_impls(args.splits, q, k_cache, v_cache, cache_seqlens, causal))
            measure(f"decode q=1, batch {batch}, kv 8k ({batch * heads_kv} tiles)", impls,
                    cache_bytes(batch, seqlen_k, heads_kv, head_dim), args, rows, kv_len=seqlen_k)
        write_csv(args.csv, rows)
        return 0
    shapes = [shape for shape in SHAPES if args.match in shape[0]]
    for label, batch, seqlen_q, seqlen_k, causal, heads_q, heads_kv, head_dim in [] if args.paged_only else shapes:
        q, k_cache, v_cache, cache_seqlens = decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
        impls = contiguous_impls(found, q, k_cache, v_cache, cache_seqlens, causal)
        kv_bytes = cache_bytes(batch, seqlen_k, heads_kv, head_dim)
        if args.splits:
            splits = {"warpflash": impls["warpflash"],
                      **fixed_split_impls(args.splits, q, k_cache, v_cache, cache_seqlens, causal)}
            measure(f"{label}, num_splits", splits, kv_bytes, args, rows)
        else:
            measure(label, impls, kv_bytes, args, rows)
    # Paged caches (random page tables) against the same cache contiguous, and FA3's and FA4's paged calls.
    for label, batch, seqlen_q, seqlen_k, causal, heads_q, heads_kv, head_dim in [
            shape for shape in PAGED_SHAPES if args.match in shape[0] and not args.splits]:
        for page_size in map(int, args.page_sizes.split(",")):
            q, k_cache, v_cache, cache_seqlens = decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
            k_pages, table = paged(k_cache, page_size)
            v_pages, _ = paged(v_cache, page_size)
            impls = {
                "warpflash": lambda: flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=cache_seqlens,
                                                             page_table=table, causal=causal),
                "warpflash-contiguous": lambda: flash_attn_with_kvcache(q, k_cache, v_cache,
                                                                        cache_seqlens=cache_seqlens, causal=causal)}
            if "fa3" in found:
                fa3 = found["fa3"]
                impls["fa3"] = lambda: fa3.flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=cache_seqlens,
                                                                   page_table=table, causal=causal)
            if "fa4" in found:
                fa4 = found["fa4"]
                impls["fa4"] = lambda: fa4.flash_attn_varlen_func(q, k_pages, v_pages, seqused_k=cache_seqlens,
                                                                  page_table=table, causal=causal)
            measure(f"{label}, paged {page_size}", impls, cache_bytes(batch, seqlen_k, heads_kv, head_dim), args, rows)
    # Appending the new token with rotary (one kernel before the attention) against the
    # same decode over a cache that already holds it, with q already rotated.
    for label, batch, seqlen_q, seqlen_k, causal, heads_q, heads_kv, head_dim in [
            shape for shape in SHAPES[:1] if args.match in shape[0] and not args.splits and not args.paged_only]:
        for page_size in (0, 16):
            q, k_cache, v_cache, _ = decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
            k_new = torch.randn(batch, seqlen_q, heads_kv, head_dim, device="cuda", dtype=torch.bfloat16)
            v_new = torch.randn_like(k_new)
            table = None
            if page_size:
                k_cache, table = paged(k_cache, page_size)
                v_cache, _ = paged(v_cache, page_size)
            angles = torch.rand(seqlen_k, head_dim // 2, device="cuda") * 6.3
            cos, sin = angles.cos(), angles.sin()
            before = torch.full((batch,), seqlen_k - seqlen_q, dtype=torch.int32, device="cuda")
            full = before + seqlen_q
            q_rotated = apply_rotary(q, cos, sin, before.long()[:, None], True)
            impls = {
                "warpflash": lambda: flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, rotary_cos=cos,
                                                             rotary_sin=sin, cache_seqlens=before, page_table=table,
                                                             causal=causal),
                "warpflash-without-append": lambda: flash_attn_with_kvcache(q_rotated, k_cache, v_cache,
                                                                            cache_seqlens=full, page_table=table,
                                                                            causal=causal)}
            measure(f"{label}, append + rotary" + (f", paged {page_size}" if page_size else ""), impls,
                    cache_bytes(batch, seqlen_k, heads_kv, head_dim), args, rows)
    # A left-padded cache (pads of 0 to 1023 rows) against the same decode without, and FA3's.
    for label, batch, seqlen_q, seqlen_k, causal, heads_q, heads_kv, head_dim in [
            shape for shape in SHAPES[:1] if args.match in shape[0] and not args.splits and not args.paged_only]:
        q, k_cache, v_cache, cache_seqlens = decode_tensors(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim)
        pads = torch.randint(0, 1024, (batch,), dtype=torch.int32, device="cuda")
        try:  # (builds from before cache_leftpad)
            flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens, cache_leftpad=pads)
        except ValueError as error:
            print(f"# cache_leftpad: skipped ({error})")
            continue
        impls = {
            "warpflash": lambda: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens,
                                                         cache_leftpad=pads, causal=causal),
            "warpflash-without-leftpad": lambda: flash_attn_with_kvcache(q, k_cache, v_cache,
                                                                         cache_seqlens=cache_seqlens, causal=causal)}
        if "fa3" in found:
            fa3 = found["fa3"]
            impls["fa3"] = lambda: fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens,
                                                               cache_leftpad=pads, causal=causal)
        measure(f"{label}, cache_leftpad 0-1023", impls, cache_bytes(batch, seqlen_k, heads_kv, head_dim), args, rows)
    write_csv(args.csv, rows)
    return 0


def write_csv(path, rows):
    if path and rows:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
