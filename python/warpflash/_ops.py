"""The compiled functions: the operator torch.ops.warpflash.forward (with its shape function
for torch.compile) and the eager fast path warpflash._C.forward, which skips the dispatcher."""
import torch

from warpflash import _C  # registers torch.ops.warpflash


@torch.library.register_fake("warpflash::forward")
def _forward_fake(q, k, v, softmax_scale, causal):
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


def forward(q, k, v, softmax_scale, causal):
    """(out, lse): the operator while torch.compile traces, the direct call in eager mode."""
    if torch.compiler.is_compiling():
        return torch.ops.warpflash.forward(q, k, v, softmax_scale, causal)
    return _C.forward(q, k, v, softmax_scale, causal)
