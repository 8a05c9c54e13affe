"""The compiled functions: the operators torch.ops.warpflash.forward, .backward,
.quantize_fp8 and .append_kv (with their shape functions for torch.compile, and the
forward's autograd formula), and the eager fast path warpflash._C.forward, which skips
the dispatcher where no gradient is needed."""
import torch

from warpflash import _C  # registers torch.ops.warpflash


@torch.library.register_fake("warpflash::forward")
def _forward_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, window_left, window_right, attention_chunk, softcap, learnable_sink,
                  deterministic=False, q_descale=None, k_descale=None, v_descale=None, num_splits=0,
                  kv_batch_idx=None, page_table=None, leftpad_k=None):
    out_dtype = torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype  # FP8 gives a bfloat16 out
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=out_dtype, device=q.device)  # V's head dim
    if cu_seqlens_q is not None:  # packed: (total_q, heads, head_dim) -> lse (heads, total_q)
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    return out, lse


@torch.library.register_fake("warpflash::backward")
def _backward_fake(d_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, attention_chunk, softcap,
                   learnable_sink, deterministic):
    d_sink = torch.empty(learnable_sink.shape[0] if learnable_sink is not None else 0, dtype=torch.float32,
                         device=q.device)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), d_sink


@torch.library.register_fake("warpflash::quantize_fp8")
def _quantize_fp8_fake(x, block_rows, hadamard, seed):
    blocks = 1 if block_rows == 0 else -(-x.shape[1] // block_rows)
    return (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device),
            torch.empty((x.shape[0], x.shape[2], blocks), dtype=torch.float32, device=x.device))


@torch.library.register_fake("warpflash::append_kv")
def _append_kv_fake(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, page_table,
                    rotary_interleaved, q_per_token):
    return torch.empty_like(q) if rotary_cos is not None else q.new_empty(0)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
     window_left, window_right, attention_chunk, softcap, learnable_sink, deterministic, *_descales_and_splits) = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)  # as in FlashAttention: the LSE is returned, not differentiated
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, learnable_sink)
    ctx.options = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, attention_chunk,
                   softcap)
    ctx.deterministic = deterministic


def _backward(ctx, d_out, d_lse):
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, learnable_sink = ctx.saved_tensors
    d_q, d_k, d_v, d_sink = torch.ops.warpflash.backward(d_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                                         seqused_q, seqused_k, *ctx.options, learnable_sink,
                                                         ctx.deterministic)
    if learnable_sink is not None:
        d_sink = d_sink.to(learnable_sink.dtype)
    else:
        d_sink = None
    # One gradient per input of the forward operator: q, k, v, 12 without one, the sink,
    # deterministic, the three descales (FP8 inputs have no gradient), num_splits and the
    # KV-cache indices kv_batch_idx, page_table and leftpad_k (flash_attn_with_kvcache's and
    # paged varlen's, which run without gradients).
    return (d_q, d_k, d_v) + (None,) * 12 + (d_sink,) + (None,) * 8


torch.library.register_autograd("warpflash::forward", _backward, setup_context=_setup_context)


def forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
            causal, window_left, window_right, attention_chunk, softcap, learnable_sink, return_lse,
            deterministic=False, descales=(None, None, None), num_splits=0, kv_batch_idx=None, page_table=None,
            leftpad_k=None):
    """out, or (out, lse) with return_lse: the operator while torch.compile traces or a
    gradient is needed, the direct call (which skips the LSE unless asked) otherwise."""
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale,
            causal, window_left, window_right, attention_chunk, softcap, learnable_sink)
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, learnable_sink))
    if torch.compiler.is_compiling() or needs_grad:
        out, lse = torch.ops.warpflash.forward(*args, deterministic, *descales, num_splits, kv_batch_idx, page_table,
                                               leftpad_k)
        return (out, lse) if return_lse else out
    return _C.forward(*args, return_lse, *descales, num_splits, kv_batch_idx, page_table, leftpad_k)
