"""The backward pass against its peers, interleaved per configuration on the same inputs:
warpflash (and its deterministic mode), cuDNN (PyTorch SDPA's CUDNN_ATTENTION backend) and
FlashAttention-4's SM90 backward where installed. The paper's workload (16k tokens, hidden
2048); backward TFLOP/s count 2.5x the forward's FLOPs (FlashAttention's convention). Each
side times only its backward: the forward runs once, outside the timing. Last, a training
step's attention, forward + backward, of the Llama-3-8B layer (32/8 heads, d 128, causal,
batch 4, seqlen 8k), in ms.

    python3 bench/backward.py [--head-dims 64,128] [--seqlens 1024,...] [--causal both|0|1]
                              [--dtypes bf16,fp16] [--no-llama]
"""
import argparse
import sys

from bench_common import (attention_flops, batch_for, causal_values, int_list, median, name_list, time_ms,
                          torch_dtype, HIDDEN)


def load_peers():
    peers = {}
    try:
        from flash_attn.cute import interface as fa4
        peers["fa4"] = fa4
    except Exception as error:  # noqa: BLE001
        print(f"# fa4: skipped: flash-attn-4 not importable ({type(error).__name__}: {error})")
    return peers


def forwards(torch, peers, q, k, v, causal, deterministic_too):
    """name -> a function computing the output with autograd, for every implementation."""
    import warpflash
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                enable_gqa=k.shape[2] != q.shape[2]).transpose(1, 2)

    def fa4():
        out = peers["fa4"].flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out

    impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=causal)}
    if deterministic_too:
        impls["warpflash-det"] = lambda: warpflash.flash_attn_func(q, k, v, causal=causal, deterministic=True)
    impls["cudnn"] = cudnn
    if "fa4" in peers:
        impls["fa4"] = fa4
    return impls


def peer_ratio(ms):
    peers = [t for name, t in ms.items() if not name.startswith("warpflash")]
    return min(peers) / ms["warpflash"] if peers else float("nan")


def run_grid(torch, peers, args):
    for dtype_name in args.dtypes:
        dtype = torch_dtype(torch, dtype_name)
        for head_dim in args.head_dims:
            heads = HIDDEN // head_dim
            for seqlen in args.seqlens:
                batch = batch_for(seqlen)
                for causal in causal_values(args.causal):
                    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype,
                                           requires_grad=True) for _ in range(3))
                    d_out = torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype)
                    outs = {}
                    for name, fn in forwards(torch, peers, q, k, v, causal, args.deterministic).items():
                        try:
                            out = fn()
                            torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True)
                            outs[name] = out
                        except Exception as error:  # noqa: BLE001
                            print(f"# {name}: skipped at d {head_dim} ({type(error).__name__}: {error})")
                    flops = 2.5 * attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
                    results = {name: [] for name in outs}
                    for _ in range(args.repeats):
                        for name, out in outs.items():
                            step = lambda out=out: torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True)
                            results[name].append(time_ms(torch, step, args.warmup, args.iters))
                    ms = {name: median(t) for name, t in results.items()}
                    line = f"{dtype_name} d{head_dim:3d} seqlen {seqlen:6d} {'causal' if causal else 'full  '}"
                    for name, t in ms.items():
                        line += f"  {name} {flops / t / 1e9:6.1f}"
                    print(line + f"  ratio to the fastest peer {peer_ratio(ms):.3f}", flush=True)


def run_llama(torch, peers, args):
    """Forward + backward of one Llama-3-8B attention layer, as a training step runs it."""
    for dtype_name in args.dtypes:
        dtype = torch_dtype(torch, dtype_name)
        q = torch.randn(4, 8192, 32, 128, device="cuda", dtype=dtype, requires_grad=True)
        k, v = (torch.randn(4, 8192, 8, 128, device="cuda", dtype=dtype, requires_grad=True) for _ in range(2))
        d_out = torch.randn_like(q)
        results = {}
        for name, fn in forwards(torch, peers, q, k, v, True, False).items():
            def step(fn=fn):
                torch.autograd.grad(fn(), (q, k, v), d_out)
            try:
                step()
            except Exception as error:  # noqa: BLE001
                print(f"# {name}: skipped ({type(error).__name__}: {error})")
                continue
            results[name] = step
        ms = {name: [] for name in results}
        for _ in range(args.repeats):
            for name, step in results.items():
                ms[name].append(time_ms(torch, step, args.warmup, args.iters))
        ms = {name: median(t) for name, t in ms.items()}
        if "warpflash" not in ms:
            continue  # its skip is printed above
        line = f"llama3-8b fwd+bwd {dtype_name} 4x8k causal GQA 32/8:" + "".join(
            f"  {name} {t:.3f} ms" for name, t in ms.items())
        print(line + "".join(f"  {name}/warpflash {t / ms['warpflash']:.3f}" for name, t in ms.items()
                             if not name.startswith("warpflash")), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--head-dims", type=int_list, default=[64, 128, 256])
    p.add_argument("--seqlens", type=int_list, default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--causal", choices=["both", "0", "1"], default="both")
    p.add_argument("--dtypes", type=name_list(["bf16", "fp16"], "dtype"), default=["bf16"])
    p.add_argument("--deterministic", action="store_true", help="also time warpflash's deterministic mode")
    p.add_argument("--no-llama", action="store_true", help="skip the Llama-3-8B forward + backward step")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args(argv)
    import torch
    peers = load_peers()
    run_grid(torch, peers, args)
    if not args.no_llama:
        run_llama(torch, peers, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
