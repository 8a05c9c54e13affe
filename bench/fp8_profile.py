"""Runs one FP8 forward problem a few times, for a profiler to pick one launch: warpflash's
FP8 kernel or FlashAttention-3's (PyPI fa3-fwd) on the same e4m3 inputs, the paper's
workload (16k tokens, hidden 2048), descales 1. DTYPE bf16 runs the 16-bit kernels instead;
HEAD_DIM 192/128 gives V its own head dim (DeepSeek-V3's prefill; 16-bit only).

    ncu --kernel-name regex:'forward_kernel|Fwd' --launch-skip 3 --launch-count 1 \
        python3 bench/fp8_profile.py {warpflash|fa3} HEAD_DIM[/D_V] CAUSAL SEQLEN [DTYPE]
"""
import sys

import torch

from bench_common import batch_for, HIDDEN


def main():
    impl, causal, seqlen = sys.argv[1], bool(int(sys.argv[3])), int(sys.argv[4])
    head_dim, head_dim_v = (int(d) for d in (sys.argv[2] + "/" + sys.argv[2]).split("/")[:2])
    dtype = {"e4m3": torch.float8_e4m3fn, "bf16": torch.bfloat16}[sys.argv[5] if len(sys.argv) > 5 else "e4m3"]
    batch, heads = batch_for(seqlen), HIDDEN // head_dim
    q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda").to(dtype) for d in (head_dim, head_dim, head_dim_v))
    if impl == "warpflash":
        import warpflash
        run = lambda: warpflash.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
    else:
        import fa3_fwd._C  # noqa: F401  (registers its operators)
        import fa3_fwd_interface
        run = lambda: fa3_fwd_interface.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
    for _ in range(5):
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
