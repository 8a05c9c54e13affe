"""16-bit dense problems of the kernels whose plain loop could give its kernel slot to FP8
d = 256's long tiles (fp8-d256-long.patch): d = 64's short causal kernel (causal up to 2k)
and d = 256's default kernel (non-causal from 2k, causal from 16k); d = 256's short kernel
is in dense_d256.py. The paper's workload (16k tokens, hidden 2048), BF16 and FP16. TFLOP/s
by the forward's formula (halved when causal); CUDA events, median of 30 launches after 5;
run once per library (PYTHONPATH)."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms

points = [(64, True, 512), (64, True, 1024), (64, True, 2048),
          (256, False, 2048), (256, False, 4096), (256, False, 16384), (256, True, 16384)]
for dtype in (torch.bfloat16, torch.float16):
    for d, causal, seqlen in points:
        batch, heads = 16384 // seqlen, 2048 // d
        q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=dtype) for _ in range(3))
        ms = time_ms(torch, lambda: warpflash.flash_attn_func(q, k, v, causal=causal), 5, 30)
        tflops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1) / ms / 1e9
        print(f"{str(dtype)[6:]} d {d} causal {int(causal)} {seqlen}: {tflops:.1f} TFLOP/s", flush=True)
