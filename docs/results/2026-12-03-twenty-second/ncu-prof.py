import sys
import torch
sys.path.insert(0, "bench")
from decode import paged  # noqa: E402
from warpflash import flash_attn_with_kvcache  # noqa: E402

torch.manual_seed(0)
for d, label in ((128, "contiguous-default"), (128, "paged256"), (128, "contiguous-long"), (64, "d64")):
    b, hq, hkv, s = 32, 32, 8, 8192
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lens = torch.full((b,), s, dtype=torch.int32, device="cuda")
    kw = {}
    if label == "paged256":
        k, kw["page_table"] = paged(k, 256)
        v, _ = paged(v, 256)
    if label == "contiguous-default":  # a zero left padding takes the KV-cache kernel (128-key blocks)
        kw["cache_leftpad"] = torch.zeros(b, dtype=torch.int32, device="cuda")
    torch.cuda.nvtx.range_push(label)
    flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, causal=True, **kw)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(label, "ok")
