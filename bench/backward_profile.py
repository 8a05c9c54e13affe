"""Runs one backward problem a few times, for a profiler to pick one launch: warpflash's
backward or FlashAttention-4's SM90 backward (PyPI flash-attn-4) on the same BF16 inputs,
the paper's workload (16k tokens, hidden 2048).

    ncu --kernel-name regex:'backward_kernel|Backward' --launch-skip 3 --launch-count 1 \
        python3 bench/backward_profile.py {warpflash|fa4} HEAD_DIM CAUSAL SEQLEN
"""
import sys

import torch

from bench_common import batch_for, HIDDEN


def main():
    impl, head_dim, causal, seqlen = sys.argv[1], int(sys.argv[2]), bool(int(sys.argv[3])), int(sys.argv[4])
    batch, heads = batch_for(seqlen), HIDDEN // head_dim
    q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    d_out = torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
    if impl == "warpflash":
        import warpflash
        out = warpflash.flash_attn_func(q, k, v, causal=causal)
    else:
        from flash_attn.cute import interface as fa4
        out = fa4.flash_attn_func(q, k, v, causal=causal)
        out = out[0] if isinstance(out, tuple) else out
    for _ in range(5):
        torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
