"""FP8 (e4m3 randn Q, K, V, descales 1) where the thirty-fifth session's libraries differ:
d = 128 at 1k-4k keys (T2k: the long tiles from 2k) and d = 256 at 4k-16k (N64: the long
tiles from 4k). The paper's workload (16k tokens, hidden 2048); TFLOP/s (halved when
causal); CUDA events, median of 30 launches after 5; run once per library (PYTHONPATH)."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms

points = [(128, 1024), (128, 2048), (128, 4096), (256, 2048), (256, 4096), (256, 16384)]
for d, seqlen in points:
    for causal in (False, True):
        batch, heads = 16384 // seqlen, 2048 // d
        q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
        ms = time_ms(torch, lambda: warpflash.flash_attn_func(q, k, v, causal=causal), 5, 30)
        tflops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1) / ms / 1e9
        print(f"e4m3 d {d} causal {int(causal)} {seqlen}: {tflops:.1f} TFLOP/s", flush=True)
