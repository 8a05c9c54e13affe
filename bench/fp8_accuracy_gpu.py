"""The FlashAttention-3 paper's FP8 accuracy study on the GPU kernels: Q, K, V entries
N(0, 1) + N(0, 100) * Bernoulli(0.001), O's RMSE against float64 attention of the original
(16-bit) inputs, for warpflash's BF16/FP16 forward, standard attention in fp16, its FP8
forward with per-tensor, per-(batch, head) and per-block scales (64 rows of Q, 128 of K
and V), each with and without the random-sign Hadamard transform of Q and K
(warpflash.quantize_fp8), and FlashAttention-3's FP8 forward (fa3-fwd) on the same e4m3
inputs and descales where its call takes them (per tensor, per (batch, head)).
(bench/fp8_accuracy.cpp is the same study in CPU emulation.)

    python3 bench/fp8_accuracy_gpu.py [--batch 2] [--seqlen 4096] [--heads 16] [--head-dim 128]
"""
import argparse
import sys

from bench_common import positive_int


def paper_inputs(torch, shape, generator):
    x = torch.randn(shape, device="cuda", dtype=torch.float64, generator=generator)
    outliers = torch.rand(shape, device="cuda", dtype=torch.float64, generator=generator) < 0.001
    return x + outliers * 10.0 * torch.randn(shape, device="cuda", dtype=torch.float64, generator=generator)


def reference(torch, q, k, v):
    """float64 softmax(q k^T / sqrt(d)) v, one head at a time, (b, s, h, d)."""
    out = torch.empty_like(q)
    scale = q.shape[-1] ** -0.5
    for h in range(q.shape[2]):
        s = q[:, :, h] @ k[:, :, h].transpose(-1, -2) * scale
        out[:, :, h] = torch.softmax(s, dim=-1) @ v[:, :, h]
    return out


def per_tensor(torch, x):
    """e4m3 codes with one scale for the whole tensor, as (batch, heads) descales."""
    scale = (x.abs().amax() / 448.0).float()
    codes = (x / scale).to(torch.float8_e4m3fn)
    return codes, scale.expand(x.shape[0], x.shape[2]).contiguous()


def standard_fp16(torch, q, k, v):
    """softmax(q k^T / sqrt(d)) v with S, P and O in fp16 (the paper's 'standard attention')."""
    out = torch.empty_like(q)
    scale = q.shape[-1] ** -0.5
    for h in range(q.shape[2]):
        s = (q[:, :, h] @ k[:, :, h].transpose(-1, -2)) * scale
        out[:, :, h] = torch.softmax(s, dim=-1) @ v[:, :, h]
    return out


def hadamard_of(torch, x, rotate):
    """x times the random-sign Hadamard matrix along head_dim (quantize_fp8's transform with
    seed 1, taken from it: the transform of the identity), or x."""
    if not rotate:
        return x
    import warpflash
    d = x.shape[-1]
    eye = torch.eye(d, device=x.device, dtype=torch.bfloat16).reshape(1, d, 1, d)
    codes, scales = warpflash.quantize_fp8(eye, block_rows=0, hadamard=True, seed=1)
    matrix = (codes.float() * scales.reshape(1, 1, 1, 1)).reshape(d, d)  # row i: the transform of e_i
    return (x.float() @ matrix).to(x.dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=positive_int, default=2)
    parser.add_argument("--seqlen", type=positive_int, default=4096)
    parser.add_argument("--heads", type=positive_int, default=16)
    parser.add_argument("--head-dim", type=positive_int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch
    import warpflash

    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    shape = (args.batch, args.seqlen, args.heads, args.head_dim)
    q64, k64, v64 = (paper_inputs(torch, shape, generator) for _ in range(3))
    q16, k16, v16 = (t.to(torch.float16) for t in (q64, k64, v64))
    exact = reference(torch, q16.double(), k16.double(), v16.double())  # of the values every method starts from

    def rmse(out):
        return ((out.double() - exact) ** 2).mean().sqrt().item()

    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype)[6:]
        if args.head_dim not in warpflash._C.compiled_head_dims(name):
            print(f"# warpflash {name}: skipped (d {args.head_dim} not in this build)")
            continue
        q, k, v = (t.to(dtype) for t in (q64, k64, v64))
        rows.append((f"warpflash {name}", rmse(warpflash.flash_attn_func(q, k, v))))
    rows.append(("standard attention in fp16 (S, P and O in fp16)", rmse(standard_fp16(torch, q16, k16, v16))))
    # recipe(x, rotate, rows): e4m3 codes and scales; rotate for q and k, rows per block.
    recipes = {"per-tensor scales": lambda x, rotate, rows: per_tensor(torch, x)}
    recipes["Hadamard + per-tensor scales"] = lambda x, rotate, rows: per_tensor(torch, hadamard_of(torch, x, rotate))
    recipes["per-(batch, head) scales"] = lambda x, rotate, rows: warpflash.quantize_fp8(x, block_rows=0)
    recipes["Hadamard + per-(batch, head) scales"] = lambda x, rotate, rows: warpflash.quantize_fp8(
        x, block_rows=0, hadamard=rotate, seed=1)
    recipes["per-block scales (64 rows of Q, 128 of K, V)"] = lambda x, rotate, rows: warpflash.quantize_fp8(
        x, block_rows=rows)
    recipes["Hadamard + per-block scales"] = lambda x, rotate, rows: warpflash.quantize_fp8(
        x, block_rows=rows, hadamard=rotate, seed=1)
    try:
        import fa3_fwd._C  # noqa: F401
        import fa3_fwd_interface as fa3
    except Exception as error:  # noqa: BLE001
        print(f"# fa3: skipped ({type(error).__name__}: {error})")
        fa3 = None
    for name, recipe in recipes.items():
        (qc, qs), (kc, ks), (vc, vs) = recipe(q16, True, 64), recipe(k16, True, 128), recipe(v16, False, 128)
        # Per-(batch, head) scales as FA3's (batch, heads_kv) descales (heads_q == heads_kv);
        # per-block scales as quantize_fp8 returns them (warpflash only).
        if qs.dim() == 3 and qs.shape[2] == 1:
            qs, ks, vs = (s.reshape(s.shape[0], s.shape[1]) for s in (qs, ks, vs))
        out = warpflash.flash_attn_func(qc, kc, vc, q_descale=qs, k_descale=ks, v_descale=vs)
        rows.append((f"warpflash FP8, {name}", rmse(out)))
        if fa3 is not None and qs.dim() == 2:
            theirs = fa3.flash_attn_func(qc, kc, vc, q_descale=qs, k_descale=ks, v_descale=vs)
            rows.append((f"FA3 FP8, {name}", rmse(theirs[0] if isinstance(theirs, tuple) else theirs)))
    if hasattr(warpflash, "flash_attn_fp8_func"):
        rows.append(("warpflash flash_attn_fp8_func (fp16 in: Hadamard + per-block, one call)",
                     rmse(warpflash.flash_attn_fp8_func(q16, k16, v16, seed=1))))
    print(f"# batch {args.batch}, seqlen {args.seqlen}, heads {args.heads}, head_dim {args.head_dim}, seed {args.seed}")
    print("| method | RMSE |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value:.3e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
