# FA4's SM90 forward at d=64 BF16 (dumping its SASS): timing with CUDA events, median of 30.
import sys, torch
from flash_attn.cute.interface import flash_attn_func
def bench(fn, iters=30):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]
for seqlen in [int(s) for s in sys.argv[1].split(",")]:
    for causal in (False, True):
        batch, heads, d = 16384 // seqlen, 32, 64
        q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fn = lambda: flash_attn_func(q, k, v, causal=causal)
        ms = bench(fn)
        flops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1)
        print(f"fa4 bf16 64 {int(causal)} {seqlen} {ms:.4f} ms {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
