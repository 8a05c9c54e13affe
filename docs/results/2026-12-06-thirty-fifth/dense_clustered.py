"""16-bit d = 128 non-causal problems that d = 128's clustered kernel (kLongClustered:
128 x 160 tiles in clusters of two CTAs multicasting K/V) serves, and those around them;
for the question whether its plain-loop slot can go to FP8 d = 256's long tiles. The
paper's workload (16k tokens, hidden 2048), BF16 and FP16; CUDA events, median of 30
launches after 5; run once per library (PYTHONPATH)."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms

for dtype in (torch.bfloat16, torch.float16):
    for seqlen in (2048, 4096, 8192, 16384):
        batch, heads, d = 16384 // seqlen, 16, 128
        q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=dtype) for _ in range(3))
        ms = time_ms(torch, lambda: warpflash.flash_attn_func(q, k, v), 5, 30)
        tflops = 4 * batch * heads * seqlen * seqlen * d / ms / 1e9
        print(f"{str(dtype)[6:]} d {d} causal 0 {seqlen}: {tflops:.1f} TFLOP/s", flush=True)
