"""The general loop's problems in 16 bits (BF16), for comparing kernel libraries on what
the masked blocks cost: variable-length batches (16k tokens; lengths 128..8k and
128..1k, fixed seeds), causal and not, at d 64, 128 and 256 (heads = 2048 / d), and
causal sliding windows on dense 4k sequences at d 128. TFLOP/s of the visible scores;
CUDA events, median of 30 launches after 5; run once per library (PYTHONPATH)."""
import sys
import torch
import warpflash
sys.path.insert(0, "bench")
from bench_common import time_ms
from features import random_lengths, visible_scores


def varlen(d, lengths, causal):
    heads = 2048 // d
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
    total = sum(lengths)
    q, k, v = (torch.randn(total, heads, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fn = lambda: warpflash.flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal)
    return 4 * visible_scores(lengths, causal) * heads * d / time_ms(torch, fn, 5, 30) / 1e9


def window(d, seqlen, left):
    heads, batch = 2048 // d, 16384 // seqlen
    q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fn = lambda: warpflash.flash_attn_func(q, k, v, causal=True, window_size=(left, 0))
    return 4 * batch * visible_scores([seqlen], True, left) * heads * d / time_ms(torch, fn, 5, 30) / 1e9


torch.manual_seed(0)
long_lengths, short_lengths = random_lengths(0), random_lengths(1, high=1024)
for d in (64, 128, 256):
    for name, lengths in (("128..8k", long_lengths), ("128..1k", short_lengths)):
        for causal in (False, True):
            print(f"d {d} varlen {name} causal {int(causal)}: {varlen(d, lengths, causal):.1f} TFLOP/s", flush=True)
for left in (1024, 128):
    print(f"d 128 window ({left}, 0) 4k: {window(128, 4096, left):.1f} TFLOP/s", flush=True)
