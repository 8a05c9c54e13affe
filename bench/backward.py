"""The backward pass against its peers, interleaved per configuration on the same inputs:
warpflash, cuDNN (PyTorch SDPA's CUDNN_ATTENTION backend) and FlashAttention-4's SM90
backward where installed. The paper's workload (16k tokens, hidden 2048); backward
TFLOP/s count 2.5x the forward's FLOPs (FlashAttention's convention). Each side times
only its backward: the forward runs once, outside the timing.

    python3 bench/backward.py [--seqlens 1024,...] [--causal both|0|1] [--dtypes bf16,fp16]
"""
import argparse
import sys

from bench_common import (attention_flops, batch_for, causal_values, int_list, median, name_list, time_ms,
                          torch_dtype, HIDDEN)


def run(args):
    import torch
    import warpflash

    peers = {}
    try:
        from flash_attn.cute import interface as fa4
        peers["fa4"] = fa4
    except Exception as error:  # noqa: BLE001
        print(f"# fa4: skipped: flash-attn-4 not importable ({type(error).__name__}: {error})")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    head_dim = 128
    heads = HIDDEN // head_dim
    for dtype_name in args.dtypes:
        dtype = torch_dtype(torch, dtype_name)
        for seqlen in args.seqlens:
            batch = batch_for(seqlen)
            for causal in causal_values(args.causal):
                q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype, requires_grad=True)
                           for _ in range(3))
                d_out = torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype)

                def backward_of(out):
                    return lambda: torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True)

                outs = {"warpflash": warpflash.flash_attn_func(q, k, v, causal=causal)}
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    outs["cudnn"] = torch.nn.functional.scaled_dot_product_attention(
                        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
                if "fa4" in peers:
                    out = peers["fa4"].flash_attn_func(q, k, v, causal=causal)
                    outs["fa4"] = out[0] if isinstance(out, tuple) else out
                flops = 2.5 * attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
                results = {name: [] for name in outs}
                for _ in range(args.repeats):
                    for name, out in outs.items():
                        results[name].append(time_ms(torch, backward_of(out), args.warmup, args.iters))
                line = f"{dtype_name} d{head_dim} seqlen {seqlen:6d} {'causal' if causal else 'full  '}"
                ms = {name: median(t) for name, t in results.items()}
                for name, t in ms.items():
                    line += f"  {name} {flops / t / 1e9:6.1f}"
                best = min(t for name, t in ms.items() if name != "warpflash")
                print(line + f"  ratio to the fastest peer {best / ms['warpflash']:.3f}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqlens", type=int_list, default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--causal", choices=["both", "0", "1"], default="both")
    p.add_argument("--dtypes", type=name_list(["bf16", "fp16"], "dtype"), default=["bf16"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    run(p.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
