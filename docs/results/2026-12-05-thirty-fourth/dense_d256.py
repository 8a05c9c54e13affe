"""16-bit d = 256 on dense sequences where forward_variant() picks the short tiles (128 x 64:
up to 1k keys, 8k causal), for comparing kernel libraries: the paper's workload (16k tokens,
hidden 2048, 8 heads), BF16 and FP16, causal and not. TFLOP/s by the forward's formula
(halved when causal); CUDA events, median of 30 launches after 5; run once per library
(PYTHONPATH)."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms

d, heads = 256, 8
for dtype in (torch.bfloat16, torch.float16):
    for causal, seqlens in ((False, (512, 1024)), (True, (512, 1024, 2048, 4096, 8192))):
        for seqlen in seqlens:
            batch = 16384 // seqlen
            q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=dtype) for _ in range(3))
            ms = time_ms(torch, lambda: warpflash.flash_attn_func(q, k, v, causal=causal), 5, 30)
            tflops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1) / ms / 1e9
            print(f"{str(dtype)[6:]} d 256 causal {int(causal)} {seqlen}: {tflops:.1f} TFLOP/s", flush=True)
