"""FlashAttention-compatible entry points: same names, same argument order."""
import math

import torch

from warpflash import _ops


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False):
    """Exact attention softmax(q k^T * softmax_scale) v on a Hopper GPU.

    q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim),
    float16 or bfloat16, head_dim 64, 128 or 256, last dimension contiguous; heads_q a
    multiple of heads_kv (GQA/MQA). softmax_scale defaults to 1/sqrt(head_dim). causal
    masks align to the bottom-right corner when seqlen_q != seqlen_k. Runs on the current
    CUDA stream; works under torch.compile and CUDA graph capture.

    Returns out (batch, seqlen_q, heads_q, head_dim), and with return_lse=True also the
    fp32 log-sum-exp (batch, heads_q, seqlen_q). Bad arguments raise ValueError or
    TypeError naming the argument, the value and what is allowed.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"warpflash: {name} must be a torch.Tensor, got {type(t).__name__}")
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    return _ops.forward(q, k, v, float(softmax_scale), bool(causal), bool(return_lse))
