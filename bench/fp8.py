"""The FP8 forward against its peers, interleaved per configuration on the same e4m3 inputs:
warpflash (flash_attn_func with torch.float8_e4m3fn q, k, v), FlashAttention-3's FP8
forward (PyPI fa3-fwd) and cuDNN's FP8 SDPA (nvidia-cudnn-frontend, bench/cudnn_fp8.py: per-tensor
descales, an FP8 O as Hopper's cuDNN requires) where installed, and warpflash's BF16
forward on the same values for scale; also warpflash's FP8 kernel with per-block scales
(quantize_fp8: 64 rows of Q, 128 of K and V) and flash_attn_fp8_func from the bf16 inputs
(quantization with the Hadamard transform, then the kernel) against the bf16 forward.
The paper's workload (16k tokens, hidden 2048), descales 1; TFLOP/s by the
forward's formula (halved when causal). Timing: CUDA events around each launch, median
(bench_common.time_ms), implementations in turn per configuration.

    python3 bench/fp8.py [--head-dims 64,128,256] [--seqlens 512,...] [--causal both|0|1]
                         [--iters 50] [--check]
"""
import argparse
import sys

from bench_common import attention_flops, batch_for, causal_values, int_list, time_ms, tflops, HIDDEN


def load_fa3():
    try:
        import fa3_fwd._C  # noqa: F401  (registers its operators)
        import fa3_fwd_interface
        return fa3_fwd_interface
    except Exception as error:  # noqa: BLE001
        print(f"# fa3: skipped: fa3-fwd not importable ({type(error).__name__}: {error})")
        return None


def load_cudnn():
    try:
        from cudnn_fp8 import make_cudnn_fp8_sdpa
        return make_cudnn_fp8_sdpa
    except Exception as error:  # noqa: BLE001
        print(f"# cudnn: skipped: nvidia-cudnn-frontend not importable ({type(error).__name__}: {error})")
        return None


def graph_time_ms(torch, fn, calls=20, repeats=10):
    """Milliseconds per call of fn, from a CUDA graph of `calls` calls replayed `repeats`
    times (median): the GPU's time alone, with no host overhead between the calls (which a
    kernel of tens of microseconds would otherwise show)."""
    fn()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return time_ms(torch, graph.replay, 2, repeats) / calls


def quantizer_bandwidth(torch, warpflash, head_dims, iters):
    """quantize_fp8 on the paper's workload (16k tokens, hidden 2048, bf16): bytes read and
    written per second against a device-to-device copy of the input (read and write), each
    timed in a CUDA graph."""
    print("| d | block rows | hadamard | quantize_fp8 us | GB/s | copy GB/s | / copy |")
    print("|---|---|---|---|---|---|---|")
    for head_dim in head_dims:
        x = torch.randn(1, 16384, HIDDEN // head_dim, head_dim, device="cuda", dtype=torch.bfloat16)
        copy = torch.empty_like(x)
        copy_ms = graph_time_ms(torch, lambda: copy.copy_(x), repeats=iters)
        copy_rate = 2 * x.numel() * x.element_size() / copy_ms / 1e6
        for block_rows, hadamard in ((128, False), (64, True), (0, False)):
            ms = graph_time_ms(torch, lambda: warpflash.quantize_fp8(x, block_rows=block_rows, hadamard=hadamard),
                               repeats=iters)
            blocks = 1 if block_rows == 0 else -(-x.shape[1] // block_rows)
            moved = x.numel() * (x.element_size() + 1) + 4 * x.shape[2] * blocks
            rate = moved / ms / 1e6
            print(f"| {head_dim} | {block_rows} | {int(hadamard)} | {ms * 1e3:.1f} | {rate:.0f} | {copy_rate:.0f} | "
                  f"{rate / copy_rate:.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dims", type=int_list, default=[64, 128, 256])
    parser.add_argument("--seqlens", type=int_list, default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--causal", choices=("both", "0", "1"), default="both")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--check", action="store_true", help="compare the outputs with each other first")
    parser.add_argument("--quantize-only", action="store_true", help="only the quantizer's bandwidth table")
    args = parser.parse_args()
    import torch
    import warpflash

    quantizer_bandwidth(torch, warpflash, args.head_dims, args.iters)
    if args.quantize_only:
        return 0

    fa3 = load_fa3()
    make_cudnn = load_cudnn()
    torch.manual_seed(0)
    print("| d | causal | seqlen | warpflash fp8 | fa3 fp8 | cudnn fp8 | vs faster peer | warpflash bf16 "
          "| fp8 block scales | / fp8 | flash_attn_fp8_func from bf16 | / bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for head_dim in args.head_dims:
        heads = HIDDEN // head_dim
        for causal in causal_values(args.causal):
            for seqlen in args.seqlens:
                batch = batch_for(seqlen)
                shape = (batch, seqlen, heads, head_dim)
                q16, k16, v16 = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                q, k, v = (t.to(torch.float8_e4m3fn) for t in (q16, k16, v16))
                impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=causal)}
                # The paper's block quantization: the kernel with per-block scales (quantized
                # beforehand), and flash_attn_fp8_func from bf16 (quantization + Hadamard + kernel).
                (qb, qs), (kb, ks), (vb, vs) = (warpflash.quantize_fp8(x, block_rows=rows)
                                                for x, rows in ((q16, 64), (k16, 128), (v16, 128)))
                impls["blocks"] = lambda: warpflash.flash_attn_func(qb, kb, vb, causal=causal, q_descale=qs,
                                                                    k_descale=ks, v_descale=vs)
                impls["fp8_func"] = lambda: warpflash.flash_attn_fp8_func(q16, k16, v16, causal=causal)
                if fa3 is not None:
                    impls["fa3"] = lambda: fa3.flash_attn_func(q, k, v, causal=causal)
                if make_cudnn is not None:
                    try:
                        impls["cudnn"] = make_cudnn(q, k, v, causal)
                    except Exception as error:  # noqa: BLE001
                        print(f"# cudnn: d {head_dim} causal {int(causal)} seqlen {seqlen}: {type(error).__name__}: {error}")
                if head_dim in warpflash._C.compiled_head_dims("bfloat16"):
                    impls["bf16"] = lambda: warpflash.flash_attn_func(q16, k16, v16, causal=causal)
                if args.check:
                    ours = impls["warpflash"]().float()
                    for name in ("fa3", "cudnn"):
                        if name in impls:
                            theirs = impls[name]()
                            theirs = (theirs[0] if isinstance(theirs, tuple) else theirs).float()
                            diff = (ours - theirs).abs().max().item()
                            print(f"# d {head_dim} causal {int(causal)} seqlen {seqlen}: max |warpflash - {name}| = {diff:.3g}")
                ms = {name: time_ms(torch, fn, 5, args.iters) for name, fn in impls.items()}
                flops = attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
                rate = {name: tflops(flops, t) for name, t in ms.items()}
                cells = {name: f"{rate[name]:.0f}" if name in rate else "-" for name in ("fa3", "cudnn", "bf16")}
                peers = [rate[name] for name in ("fa3", "cudnn") if name in rate]
                ratio = f"{rate['warpflash'] / max(peers):.2f}" if peers else "-"
                func_vs_bf16 = f"{rate['fp8_func'] / rate['bf16']:.2f}" if "bf16" in rate else "-"
                print(f"| {head_dim} | {int(causal)} | {seqlen} | {rate['warpflash']:.0f} | {cells['fa3']} | "
                      f"{cells['cudnn']} | {ratio} | {cells['bf16']} | {rate['blocks']:.0f} | "
                      f"{rate['blocks'] / rate['warpflash']:.2f} | {rate['fp8_func']:.0f} | {func_vs_bf16} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
