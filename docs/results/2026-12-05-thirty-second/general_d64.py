"""BF16 d = 64 problems of the general loop's three-warpgroup kernel (192 x 128 tiles), for
the thirty-second session's skipped blocks: varlen (16k tokens, random lengths 128..8k),
causal and not, and a dense 4k causal window (1024, 0). TFLOP/s of the visible scores;
CUDA events, median of 30 launches after 5; run once per library."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms
from features import random_lengths, visible_scores

torch.manual_seed(0)
heads, d = 32, 64
lengths = random_lengths(0)
cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
total = sum(lengths)
q, k, v = (torch.randn(total, heads, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for causal in (False, True):
    fn = lambda: warpflash.flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
    ms = time_ms(torch, fn, 5, 30)
    print(f"varlen causal {int(causal)}: {4 * visible_scores(lengths, causal) * heads * d / ms / 1e9:.1f} TFLOP/s")
qd, kd, vd = (torch.randn(4, 4096, heads, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for window in (1024, 128):
    fn = lambda: warpflash.flash_attn_func(qd, kd, vd, causal=True, window_size=(window, 0))
    ms = time_ms(torch, fn, 5, 30)
    print(f"window ({window}, 0) 4k: {4 * 4 * visible_scores([4096], True, window) * heads * d / ms / 1e9:.1f} TFLOP/s")
