"""The compiled functions: the operator torch.ops.warpflash.forward (with its shape function
for torch.compile) and the eager fast path warpflash._C.forward, which skips the dispatcher."""
import torch

from warpflash import _C  # registers torch.ops.warpflash


@torch.library.register_fake("warpflash::forward")
def _forward_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, window_left, window_right, attention_chunk, softcap, learnable_sink):
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype, device=q.device)  # V's head dim
    if cu_seqlens_q is not None:  # packed: (total_q, heads, head_dim) -> lse (heads, total_q)
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


def forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
            causal, window_left, window_right, attention_chunk, softcap, learnable_sink, return_lse):
    """out, or (out, lse) with return_lse: the operator while torch.compile traces, the
    direct call (which skips the LSE unless asked) in eager mode."""
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
            causal, window_left, window_right, attention_chunk, softcap, learnable_sink)
    if torch.compiler.is_compiling():
        out, lse = torch.ops.warpflash.forward(*args)
        return (out, lse) if return_lse else out
    return _C.forward(*args, return_lse)
