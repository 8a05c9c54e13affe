"""The compiled functions: the operator torch.ops.warpflash.forward (with its shape function
for torch.compile) and the eager fast path warpflash._C.forward, which skips the dispatcher."""
import torch

from warpflash import _C  # registers torch.ops.warpflash


@torch.library.register_fake("warpflash::forward")
def _forward_fake(q, k, v, softmax_scale, causal):
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


def forward(q, k, v, softmax_scale, causal, return_lse):
    """out, or (out, lse) with return_lse: the operator while torch.compile traces, the
    direct call (which skips the LSE unless asked) in eager mode."""
    if torch.compiler.is_compiling():
        out, lse = torch.ops.warpflash.forward(q, k, v, softmax_scale, causal)
        return (out, lse) if return_lse else out
    return _C.forward(q, k, v, softmax_scale, causal, return_lse)
