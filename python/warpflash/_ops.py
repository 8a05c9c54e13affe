"""The compiled operators (torch.ops.warpflash.*) and their shape functions for torch.compile."""
import importlib.util

import torch

# The extension holds only TORCH_LIBRARY registrations (no Python module init): load it
# as an operator library.
torch.ops.load_library(importlib.util.find_spec("warpflash._C").origin)


@torch.library.register_fake("warpflash::forward")
def _forward_fake(q, k, v, softmax_scale, causal):
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


forward = torch.ops.warpflash.forward
