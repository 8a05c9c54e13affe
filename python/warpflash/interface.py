"""FlashAttention-compatible entry points: same names, same argument order."""
import math

import torch

from warpflash import _ops


def _check_tensors(**tensors):
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"warpflash: {name} must be a torch.Tensor, got {type(t).__name__}")


def _mask_options(window_size, attention_chunk, softcap):
    try:
        left, right = (int(x) for x in window_size)
    except (TypeError, ValueError):
        raise TypeError(f"warpflash: window_size must be a pair of ints (left, right), got {window_size!r}") from None
    if left < -1 or right < -1:
        raise ValueError(f"warpflash: window_size = ({left}, {right}) is not allowed: each side is -1 (unbounded) or >= 0")
    if int(attention_chunk) < 0:
        raise ValueError(f"warpflash: attention_chunk = {attention_chunk} must be >= 0 (0: no chunks)")
    if not (math.isfinite(float(softcap)) and float(softcap) >= 0):
        raise ValueError(f"warpflash: softcap = {softcap} must be finite and >= 0 (0: no softcap)")
    return left, right, int(attention_chunk), float(softcap)


def _sink(learnable_sink):
    if learnable_sink is not None and not isinstance(learnable_sink, torch.Tensor):
        raise TypeError(f"warpflash: learnable_sink must be a torch.Tensor or None, got {type(learnable_sink).__name__}")
    return learnable_sink


def _descales(**descales):
    for name, t in descales.items():
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"warpflash: {name} must be a torch.Tensor or None, got {type(t).__name__}")
    return tuple(descales.values())


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, *, window_size=(-1, -1),
                    softcap=0.0, attention_chunk=0, learnable_sink=None, deterministic=False, q_descale=None,
                    k_descale=None, v_descale=None, num_splits=0):
    """Exact attention softmax(q k^T * softmax_scale) v on a Hopper GPU.

    q, k: (batch, seqlen_q / seqlen_k, heads_q / heads_kv, head_dim); v: (batch, seqlen_k,
    heads_kv, head_dim_v); float16 or bfloat16; head_dim 64, 96, 128, 192 or 256 with
    head_dim_v = head_dim, or 192 with head_dim_v 128 (DeepSeek-V3); last dimension
    contiguous; heads_q a multiple of heads_kv (GQA/MQA). softmax_scale defaults to
    1/sqrt(head_dim). causal masks align to the bottom-right corner when seqlen_q != seqlen_k. Runs on the current
    CUDA stream; works under torch.compile and CUDA graph capture.

    As in FlashAttention: window_size = (left, right) limits query i to keys
    [i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right] (-1: unbounded;
    causal sets right = 0); attention_chunk > 0 limits it to the keys of its chunk (Llama 4);
    softcap > 0 replaces each scaled score s by softcap * tanh(s / softcap) (Gemma 2);
    learnable_sink, a (heads_q,) tensor, adds one logit per query head to every row's
    softmax denominator (gpt-oss; the LSE includes it).

    Differentiable in q, k and v (the LSE is not); deterministic=True makes the backward's
    results bitwise identical run to run.

    num_splits divides each query tile's keys among CTAs, merged by their LSE
    (flash-decoding): 0 chooses from the problem (problems with fewer tiles than SMs: all
    tiles' keys in equal runs, one per SM), 1 never splits, 2..128 always (that many
    pieces per tile; 16-bit inputs, no learnable_sink).

    FP8 (FlashAttention-3's call): q, k, v of dtype torch.float8_e4m3fn (head_dim 64, 128 or
    256), with optional fp32 descales q_descale, k_descale, v_descale of shape (batch,
    heads_kv) (or one element): the inputs stand for q * q_descale etc. per (batch, K/V
    head). Each may instead be per-block scales as quantize_fp8 returns them, (batch,
    heads, num_blocks) with the tensor's own heads: blocks of 64 or 128 rows for q, 128
    for k and v, or one block per (batch, head) (the paper's block quantization; dense
    batches). out is bfloat16; no gradient, no softcap.

    Returns out (batch, seqlen_q, heads_q, head_dim_v), and with return_lse=True also the
    fp32 log-sum-exp (batch, heads_q, seqlen_q). Bad arguments raise ValueError or
    TypeError naming the argument, the value and what is allowed.
    """
    _check_tensors(q=q, k=k, v=v)
    left, right, chunk, softcap = _mask_options(window_size, attention_chunk, softcap)
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    descales = _descales(q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)
    return _ops.forward(q, k, v, None, None, None, None, 0, 0, float(softmax_scale), bool(causal), left, right, chunk,
                        softcap, _sink(learnable_sink), bool(return_lse), bool(deterministic), descales,
                        int(num_splits))


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                           causal=False, window_size=(-1, -1), softcap=0.0, *, seqused_q=None, seqused_k=None,
                           attention_chunk=0, learnable_sink=None, return_lse=False, deterministic=False,
                           q_descale=None, k_descale=None, v_descale=None, block_table=None):
    """Attention over a batch of variable-length sequences packed one after the other
    (FlashAttention's varlen layout).

    q: (total_q, heads_q, head_dim), k: (total_k, heads_kv, head_dim), v: (total_k,
    heads_kv, head_dim_v), head dims as flash_attn_func; sequence b holds
    rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and [cu_seqlens_k[b], cu_seqlens_k[b + 1])
    of k and v; cu_seqlens_* are int32 (batch + 1,) CUDA tensors starting at 0, non-decreasing
    (not checked: other values give wrong results, never accesses outside the tensors);
    max_seqlen_* bound the lengths (longer sequences are cut). Sequences may be empty.
    seqused_q / seqused_k, int32 (batch,), count only the first seqused[b] tokens of each
    sequence (rows past it are not written). Masks, softcap and sinks as flash_attn_func,
    per sequence.

    FP8 inputs and their descales (batch, heads_kv) as flash_attn_func.

    Paged keys (FlashAttention-2's block_table, int32 (batch, max_pages); chunked prefill
    over a paged KV cache): k, v are (num_pages, page_size, heads_kv, head_dim), sequence
    b's key t in row t % page_size of page block_table[b, t // page_size], its length
    cu_seqlens_k[b + 1] - cu_seqlens_k[b] (or seqused_k[b]). No gradient.

    Returns out (total_q, heads_q, head_dim_v), and with return_lse=True also the fp32
    log-sum-exp (heads_q, total_q).
    """
    _check_tensors(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    for name, t in (("seqused_q", seqused_q), ("seqused_k", seqused_k)):
        if t is not None:
            _check_tensors(**{name: t})
    left, right, chunk, softcap = _mask_options(window_size, attention_chunk, softcap)
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    descales = _descales(q_descale=q_descale, k_descale=k_descale, v_descale=v_descale)
    if block_table is not None:
        _check_tensors(block_table=block_table)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            raise ValueError("warpflash: flash_attn_varlen_func with block_table (a paged KV cache) has no gradient; "
                             "call it under torch.no_grad() or with tensors that do not require grad")
        if seqused_k is None:  # the key lengths; the pages hold the keys
            seqused_k = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int32)
        return _ops.forward(q, k, v, cu_seqlens_q, None, seqused_q, seqused_k, int(max_seqlen_q), 0,
                            float(softmax_scale), bool(causal), left, right, chunk, softcap, _sink(learnable_sink),
                            bool(return_lse), bool(deterministic), descales, page_table=block_table)
    return _ops.forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, int(max_seqlen_q),
                        int(max_seqlen_k), float(softmax_scale), bool(causal), left, right, chunk, softcap,
                        _sink(learnable_sink), bool(return_lse), bool(deterministic), descales)


def quantize_fp8(x, block_rows=0, hadamard=False, seed=0):
    """x (batch, seqlen, heads, head_dim), float16 or bfloat16 on the GPU, to FP8 in one pass:
    returns (codes, scales), codes float8_e4m3fn of x's shape (contiguous) and fp32 scales
    (batch, heads, ceil(seqlen / block_rows)) with x ~= codes * scales per block of
    block_rows rows (64 or 128; 0: one scale per (batch, head)), each scale amax / 448.
    hadamard=True applies the random-sign Hadamard transform along head_dim first (the
    FlashAttention-3 paper's incoherent processing; head_dim 64, 128 or 256), with signs
    drawn from `seed`: transform q and k with the same seed and q k^T is unchanged. For
    flash_attn_func's per-(batch, K/V head) descales take block_rows=0 with heads_q ==
    heads_kv (or one scale of a GQA group's own); flash_attn_func also takes the scales as
    they are, per block (block_rows 64 or 128 for q, 128 for k and v) or per (batch,
    head), with any heads."""
    _check_tensors(x=x)
    return torch.ops.warpflash.quantize_fp8(x, int(block_rows), bool(hadamard), int(seed))


def flash_attn_fp8_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, *, window_size=(-1, -1),
                        attention_chunk=0, learnable_sink=None, block_quant=True, hadamard=True, seed=0):
    """FP8 attention of float16 or bfloat16 q, k, v (as flash_attn_func; head_dim 64, 128 or
    256): the FlashAttention-3 paper's recipe. quantize_fp8 turns each into e4m3 with one
    scale per block of rows (block_quant=True: 64 rows of q, 128 of k and v; False: one
    per (batch, head)), after the random-sign Hadamard transform of q and k along head_dim
    (hadamard=True, signs from `seed`), which leaves q k^T unchanged and spreads outliers;
    then the FP8 forward runs with those scales. out has q's dtype (the kernel writes
    bfloat16); no gradient, no softcap. Returns out, and with return_lse=True the fp32 LSE.
    """
    _check_tensors(q=q, k=k, v=v)
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"warpflash: flash_attn_fp8_func takes float16 or bfloat16 q, k, v, got {q.dtype} "
                        "(for float8_e4m3fn inputs call flash_attn_func with their descales)")
    if q.dim() != 4:
        raise ValueError(f"warpflash: flash_attn_fp8_func takes 4-D (batch, seqlen, heads, head_dim) q, k, v, "
                         f"got q of shape {tuple(q.shape)}")
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    q_rows, kv_rows = (64, 128) if block_quant else (0, 0)
    q8, q_scale = quantize_fp8(q, block_rows=q_rows, hadamard=hadamard, seed=seed)
    k8, k_scale = quantize_fp8(k, block_rows=kv_rows, hadamard=hadamard, seed=seed)
    v8, v_scale = quantize_fp8(v, block_rows=kv_rows)
    result = flash_attn_func(q8, k8, v8, softmax_scale, causal, return_lse, window_size=window_size,
                             attention_chunk=attention_chunk, learnable_sink=learnable_sink, q_descale=q_scale,
                             k_descale=k_scale, v_descale=v_scale)
    out, lse = result if return_lse else (result, None)
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


def apply_rotary(x, cos, sin, positions, interleaved=True):
    """x (batch, seqlen, heads, head_dim) with its first rotary_dim = 2 * cos.shape[-1]
    channels rotated by the angles of `positions` (batch, seqlen), whose cos and sin are
    rows of the (max_position, rotary_dim / 2) tables: pairs (x[2i], x[2i + 1]) when
    interleaved (GPT-J), (x[i], x[i + rotary_dim / 2]) otherwise (GPT-NeoX). In fp32, then
    back to x's dtype."""
    rotary_dim = 2 * cos.shape[-1]
    c = cos[positions].unsqueeze(2).float()
    s = sin[positions].unsqueeze(2).float()
    x_rot = x[..., :rotary_dim].float()
    if interleaved:
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]
        rotated = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = x_rot.chunk(2, dim=-1)
        rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((rotated.to(x.dtype), x[..., rotary_dim:]), dim=-1)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, learnable_sink=None, num_splits=0, return_softmax_lse=False):
    """Attention of q over a KV cache, FlashAttention's call for decoding.

    q (batch, seqlen_q, heads_q, head_dim); k_cache, v_cache (batch, seqlen_cache,
    heads_kv, head_dim / head_dim_v), the cache of each sequence (or of batch_cache
    sequences, sequence b at row cache_batch_idx[b], int32 (batch,)); or paged, with
    page_table int32 (batch, max_pages): k_cache, v_cache (num_pages, page_size, heads_kv,
    ...), sequence b's token t in row t % page_size of page page_table[b, t // page_size]
    (any page size, pages of 64 rows and more load fastest; head dims 64, 128, 256).
    cache_seqlens, an int or int32 (batch,) CUDA tensor, how many of its tokens are filled
    (None: all). cache_leftpad, int32 (batch,): sequence b's keys start at row
    cache_leftpad[b] of its cache (left-padded batches; the rows before are not attended,
    causal and windows align to the keys that remain; new tokens and rotary positions still
    count cache slots from 0, as FlashAttention's). With k and v
    (batch, seqlen_new, heads_kv, ...), the new tokens are written into the caches in place
    at cache_seqlens .. cache_seqlens + seqlen_new - 1 (the caller keeps those slots inside
    the cache and its pages) and attended in the same call. With rotary_cos and rotary_sin
    (max_position, rotary_dim / 2), k is rotated at those positions (cache slots) before it
    is written, and q at the same positions when causal or windowed, else all of q at
    position cache_seqlens (rotary_interleaved: GPT-J pairs, else GPT-NeoX halves). causal
    aligns each query to the end of its sequence's keys; window_size, softcap,
    learnable_sink as flash_attn_func. num_splits divides each (sequence, head)'s keys
    among CTAs (0: chosen for the problem; 1: never). With GQA the query heads of a K/V
    head share one tile, so the cache is read once per K/V head.

    Returns out (batch, seqlen_q, heads_q, head_dim_v), and (out, lse) with
    return_softmax_lse (lse fp32 (batch, heads_q, seqlen_q)); no gradient.
    """
    _check_tensors(q=q, k_cache=k_cache, v_cache=v_cache)
    if (k is None) != (v is None):
        raise ValueError("warpflash: flash_attn_with_kvcache: k and v are given together (new tokens) or not at all")
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("warpflash: flash_attn_with_kvcache: rotary_cos and rotary_sin are given together or not at all")
    if q.dim() != 4 or k_cache.dim() != 4 or v_cache.dim() != 4:
        raise ValueError(f"warpflash: flash_attn_with_kvcache takes 4-D q, k_cache, v_cache, got shapes "
                         f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    batch, seqlen_q = q.shape[0], q.shape[1]
    if cache_batch_idx is not None:
        _check_tensors(cache_batch_idx=cache_batch_idx)
        if cache_batch_idx.shape != (batch,) or cache_batch_idx.dtype != torch.int32:
            raise ValueError(f"warpflash: cache_batch_idx is {cache_batch_idx.dtype} of shape "
                             f"{tuple(cache_batch_idx.shape)}; expected int32 ({batch},)")
    if cache_leftpad is not None:
        _check_tensors(cache_leftpad=cache_leftpad)
        if cache_leftpad.shape != (batch,) or cache_leftpad.dtype != torch.int32:
            raise ValueError(f"warpflash: cache_leftpad is {cache_leftpad.dtype} of shape "
                             f"{tuple(cache_leftpad.shape)}; expected int32 ({batch},)")
    if page_table is not None:
        _check_tensors(page_table=page_table)
        if page_table.dim() != 2 or page_table.shape[0] != batch or page_table.dtype != torch.int32:
            raise ValueError(f"warpflash: page_table is {page_table.dtype} of shape {tuple(page_table.shape)}; "
                             f"expected int32 ({batch}, max_pages)")
        if cache_batch_idx is not None:
            raise ValueError("warpflash: cache_batch_idx is not supported with page_table (the table picks the pages)")
    if (cache_batch_idx is not None or page_table is not None) and v_cache.shape[0] != k_cache.shape[0]:
        raise ValueError(f"warpflash: k_cache and v_cache have {k_cache.shape[0]} and {v_cache.shape[0]} "
                         f"{'pages' if page_table is not None else 'rows'}")
    if cache_batch_idx is None and page_table is None and (k_cache.shape[0] != batch or v_cache.shape[0] != batch):
        raise ValueError(f"warpflash: k_cache and v_cache have batch {k_cache.shape[0]} and {v_cache.shape[0]}; "
                         f"q has {batch} (one cache row per sequence, cache_batch_idx or page_table)")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    elif cache_seqlens is not None:
        _check_tensors(cache_seqlens=cache_seqlens)
        if cache_seqlens.shape != (batch,) or cache_seqlens.dtype != torch.int32:
            raise ValueError(f"warpflash: cache_seqlens is {cache_seqlens.dtype} of shape "
                             f"{tuple(cache_seqlens.shape)}; expected an int or int32 ({batch},)")
    left, right, _, softcap = _mask_options(window_size, 0, softcap)
    seqlen_new = 0
    if k is not None:
        _check_tensors(k=k, v=v)
        if cache_seqlens is None:
            raise ValueError("warpflash: flash_attn_with_kvcache: new k and v need cache_seqlens (where they go)")
        if k.dim() != 4 or k.shape[0] != batch or k.shape[2:] != k_cache.shape[2:] or v.shape[:2] != k.shape[:2] \
                or v.shape[2:] != v_cache.shape[2:]:
            raise ValueError(f"warpflash: new k, v have shapes {tuple(k.shape)}, {tuple(v.shape)}; expected "
                             f"({batch}, seqlen_new) + the caches' {tuple(k_cache.shape[2:])}, {tuple(v_cache.shape[2:])}")
        seqlen_new = k.shape[1]
    if rotary_cos is not None:
        _check_tensors(rotary_cos=rotary_cos, rotary_sin=rotary_sin)
        if rotary_cos.dim() != 2 or rotary_sin.shape != rotary_cos.shape or 2 * rotary_cos.shape[1] > q.shape[-1]:
            raise ValueError(f"warpflash: rotary_cos, rotary_sin have shapes {tuple(rotary_cos.shape)}, "
                             f"{tuple(rotary_sin.shape)}; expected equal (max_position, rotary_dim / 2) with "
                             f"rotary_dim <= head_dim = {q.shape[-1]}")
    seqused_k = cache_seqlens
    if k is not None or rotary_cos is not None:
        # One kernel: the new tokens into their slots in place (rotated), q rotated (from
        # position 0 without cache_seqlens).
        starts = cache_seqlens if cache_seqlens is not None else torch.zeros(batch, dtype=torch.int32, device=q.device)
        per_token = causal or left >= 0 or right >= 0
        q_rotated = torch.ops.warpflash.append_kv(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, starts,
                                                  cache_batch_idx, page_table, bool(rotary_interleaved), per_token)
        if rotary_cos is not None:
            q = q_rotated
        if k is not None:
            seqused_k = cache_seqlens + seqlen_new
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    with torch.no_grad():  # as FlashAttention's: no gradient through the cache
        return _ops.forward(q, k_cache, v_cache, None, None, None, seqused_k, 0, 0, float(softmax_scale),
                            bool(causal), left, right, 0, softcap, _sink(learnable_sink), bool(return_softmax_lse),
                            num_splits=int(num_splits), kv_batch_idx=cache_batch_idx, page_table=page_table,
                            leftpad_k=cache_leftpad)
