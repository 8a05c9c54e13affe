"""FlashAttention-compatible entry points: same names, same argument order."""
import math

import torch

from warpflash import _ops

_SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)


def _check_inputs(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"warpflash: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"warpflash: {name} must be 4-D (batch, seqlen, heads, head_dim), got shape {tuple(t.shape)}")
        if t.dtype not in _SUPPORTED_DTYPES:
            raise TypeError(f"warpflash: {name} has dtype {t.dtype}; supported are torch.float16, torch.bfloat16")
        if t.stride(-1) != 1:
            raise ValueError(f"warpflash: {name}.stride(-1) = {t.stride(-1)}; the last dimension (head_dim) must be "
                             "contiguous (call .contiguous())")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"warpflash: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"warpflash: k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"warpflash: q {tuple(q.shape)} and k {tuple(k.shape)} must agree in batch and head_dim")
    if k.shape[2] == 0 or q.shape[2] % k.shape[2] != 0:
        raise ValueError(f"warpflash: q heads ({q.shape[2]}) must be a multiple of k/v heads ({k.shape[2]})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type != "cuda":
            raise ValueError(f"warpflash: {name} is on {t.device}; warpflash runs on CUDA (Hopper) tensors")
    if not (q.device == k.device == v.device):
        raise ValueError(f"warpflash: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False):
    """Exact attention softmax(q k^T * softmax_scale) v on a Hopper GPU.

    q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim),
    float16 or bfloat16, head_dim 64, 128 or 256; heads_q a multiple of heads_kv (GQA/MQA).
    softmax_scale defaults to 1/sqrt(head_dim). causal masks align to the bottom-right
    corner when seqlen_q != seqlen_k. Runs on the current CUDA stream.

    Returns out (batch, seqlen_q, heads_q, head_dim), and with return_lse=True also the
    fp32 log-sum-exp (batch, heads_q, seqlen_q).
    """
    _check_inputs(q, k, v)
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    out, lse = _ops.forward(q, k, v, float(softmax_scale), bool(causal))
    return (out, lse) if return_lse else out
