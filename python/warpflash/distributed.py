"""Context parallelism: attention over a sequence split across the ranks of a process group
(ring attention), forward and backward, on torch.distributed's point-to-point operations.

Every rank holds its shard of the sequence's q, k and v. The K/V shards travel around the
ring (rank r sends to r + 1 and receives from r - 1); each rank attends its queries to the
shard in hand while the next one is on its way, and merges the partial outputs by their
log-sum-exp in fp32 (the split-KV combine). The backward sends the K/V shards around again,
each with the fp32 sums of its dK and dV, which arrive back at their own rank after a full
turn; each piece's gradients come from warpflash's backward with the final out and LSE.

Layouts of the shards (`layout`):
- "contiguous": rank r holds the r-th of world_size equal chunks of the sequence;
- "zigzag": the sequence in 2 * world_size chunks, rank r holding chunks r and
  2 * world_size - 1 - r one after the other, so that under a causal mask every rank has
  the same work (zigzag_shard / zigzag_unshard convert).

On CUDA tensors each piece runs warpflash's kernels; CPU tensors take a float64-exact
PyTorch path (the same ring, for tests and debugging on machines without GPUs).
"""
import math

import torch
import torch.distributed as dist


def zigzag_shard(x, world_size, rank, dim=1):
    """The part of a whole-sequence tensor that `rank` holds in the zigzag layout: chunks
    rank and 2 * world_size - 1 - rank of 2 * world_size (seqlen must divide evenly)."""
    if x.shape[dim] % (2 * world_size) != 0:
        raise ValueError(f"warpflash: zigzag_shard: seqlen {x.shape[dim]} is not a multiple of "
                         f"2 * world_size = {2 * world_size}")
    chunks = x.chunk(2 * world_size, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world_size - 1 - rank]], dim=dim)


def zigzag_unshard(parts, dim=1):
    """The whole-sequence tensor from every rank's zigzag part, given in rank order."""
    halves = [part.chunk(2, dim=dim) for part in parts]
    return torch.cat([h[0] for h in halves] + [h[1] for h in reversed(halves)], dim=dim)


def _accumulator(t):
    """t in fp32, or in float64 when it is (the CPU path's exact sums)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def merge_partials(out, lse, part_out, part_lse):
    """Merges attention over two disjoint key sets by their log-sum-exp: out (b, s, h, d) and
    lse (b, h, s), in fp32 (float64 inputs stay float64); None for nothing yet. Rows that saw
    no key (-inf) get weight 0."""
    part_out, part_lse = _accumulator(part_out), _accumulator(part_lse)
    if out is None:
        return part_out, part_lse
    new_lse = torch.logaddexp(lse, part_lse)
    safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
    old_weight = torch.exp(lse - safe).transpose(1, 2).unsqueeze(-1)
    part_weight = torch.exp(part_lse - safe).transpose(1, 2).unsqueeze(-1)
    return out * old_weight + part_out * part_weight, new_lse


def _piece_forward(q, k, v, scale, causal):
    """out and fp32 lse (b, h, s) of q attending to k, v (causal: bottom-right aligned)."""
    if q.is_cuda:
        return torch.ops.warpflash.forward(q, k, v, None, None, None, None, 0, 0, scale, causal, -1, -1, 0, 0.0, None)
    scores, values = _cpu_scores(q, k, v, scale, causal)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0)
    return (probs @ values).transpose(1, 2).to(q.dtype), lse


def _piece_backward(d_out, q, k, v, out, lse, scale, causal, deterministic):
    """dq, dk, dv of one piece, from the whole attention's out and lse (so that P is the
    whole softmax's, and rowsum(dO * O) the whole output's)."""
    if q.is_cuda:
        d_q, d_k, d_v, _ = torch.ops.warpflash.backward(d_out, q, k, v, out, lse.contiguous(), None, None, None, None,
                                                        0, 0, scale, causal, -1, -1, 0, 0.0, None, deterministic)
        return d_q, d_k, d_v
    scores, values = _cpu_scores(q, k, v, scale, causal)
    probs = torch.exp(scores - lse.double().unsqueeze(-1)).nan_to_num(0.0)
    d_o = d_out.double().transpose(1, 2)
    d_values = probs.transpose(-1, -2) @ d_o
    d_probs = d_o @ values.transpose(-1, -2)
    delta = (d_o * out.double().transpose(1, 2)).sum(-1, keepdim=True)
    d_scores = probs * (d_probs - delta) * scale
    keys = k.double().transpose(1, 2).repeat_interleave(q.shape[2] // k.shape[2], dim=1)
    d_q = d_scores @ keys
    d_keys = d_scores.transpose(-1, -2) @ q.double().transpose(1, 2)
    group = q.shape[2] // k.shape[2]  # GQA: the query heads of a K/V head add up
    fold = lambda t: t.unflatten(1, (k.shape[2], group)).sum(2).transpose(1, 2)  # noqa: E731
    return d_q.transpose(1, 2).to(q.dtype), fold(d_keys).to(k.dtype), fold(d_values).to(v.dtype)


def _cpu_scores(q, k, v, scale, causal):
    """float64 scores (b, h, sq, sk), masked, and the values (b, h, sk, d) per query head."""
    group = q.shape[2] // k.shape[2]
    qt = q.double().transpose(1, 2)
    kt = k.double().transpose(1, 2).repeat_interleave(group, dim=1)
    vt = v.double().transpose(1, 2).repeat_interleave(group, dim=1)
    scores = (qt @ kt.transpose(-1, -2)) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        row = torch.arange(sq)[:, None] + sk - sq
        scores = scores.masked_fill(torch.arange(sk)[None, :] > row, float("-inf"))
    return scores, vt


def _pieces(step, rank, world_size, causal, layout, local_seqlen):
    """The pieces of the K/V shard in hand at `step` (from rank (rank - step) mod world_size)
    that rank's queries attend to: (query rows, key rows, causal) with rows as slices of the
    local shards; none where every score is masked."""
    everything = slice(0, local_seqlen)
    if not causal:
        return [(everything, everything, False)]
    source = (rank - step) % world_size
    if source == rank:  # the shard's own keys: causal (zigzag's two chunks keep their order)
        return [(everything, everything, True)]
    if layout == "contiguous":
        return [(everything, everything, False)] if source < rank else []
    half = local_seqlen // 2
    if source < rank:  # both of its chunks' queries see the source's early chunk, not its late one
        return [(everything, slice(0, half), False)]
    return [(slice(half, local_seqlen), everything, False)]  # only the late chunk's queries, all its keys


class _Ring:
    """Sends tensors to the next rank and receives the previous rank's, asynchronously."""

    def __init__(self, group):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        global_rank = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
        self.next = global_rank((self.rank + 1) % self.world_size)
        self.prev = global_rank((self.rank - 1) % self.world_size)

    def start(self, tensors):
        """Sends `tensors` on and receives as many from the previous rank; returns a function
        that waits for both and returns the received tensors."""
        sent = [t.contiguous() for t in tensors]  # referenced until the sends are done
        received = [torch.empty_like(t) for t in sent]
        ops = [dist.P2POp(dist.isend, t, self.next, self.group) for t in sent]
        ops += [dist.P2POp(dist.irecv, r, self.prev, self.group) for r in received]
        requests = dist.batch_isend_irecv(ops)

        def wait():
            for request in requests:
                request.wait()
            del sent[:]
            return received
        return wait


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, causal, layout, group, deterministic):
        ring = _Ring(group)
        local = q.shape[1]
        partials = {}  # (first, last + 1) query row of the pieces -> their merged (out, lse) so far
        k_cur, v_cur = k, v
        for step in range(ring.world_size):
            pending = ring.start([k_cur, v_cur]) if step + 1 < ring.world_size else None
            for rows, keys, piece_causal in _pieces(step, ring.rank, ring.world_size, causal, layout, local):
                part_out, part_lse = _piece_forward(q[:, rows], k_cur[:, keys], v_cur[:, keys], scale, piece_causal)
                key = (rows.start, rows.stop)
                partials[key] = merge_partials(*partials.get(key, (None, None)), part_out, part_lse)
            if pending is not None:
                k_cur, v_cur = pending()
        # Pieces cover either all query rows or the second half (zigzag): merge the latter in.
        out, lse = partials.pop((0, local))
        for (start, stop), (part_out, part_lse) in partials.items():
            merged_out, merged_lse = merge_partials(out[:, start:stop], lse[..., start:stop], part_out, part_lse)
            out = torch.cat([out[:, :start], merged_out, out[:, stop:]], dim=1)
            lse = torch.cat([lse[..., :start], merged_lse, lse[..., stop:]], dim=-1)
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (scale, causal, layout, group, deterministic)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        scale, causal, layout, group, deterministic = ctx.options
        ring = _Ring(group)
        local = q.shape[1]
        d_q = _accumulator(torch.zeros_like(q))
        k_cur, v_cur = k, v
        d_out = d_out.contiguous()
        # The dK, dV sums of the K/V shard in hand, from the ranks that held it before: on
        # their way from the previous rank while this rank computes its own share.
        incoming = None
        for step in range(ring.world_size):
            pending_kv = ring.start([k_cur, v_cur]) if step + 1 < ring.world_size else None
            d_k_cur, d_v_cur = _accumulator(torch.zeros_like(k)), _accumulator(torch.zeros_like(v))
            for rows, keys, piece_causal in _pieces(step, ring.rank, ring.world_size, causal, layout, local):
                dq, dk, dv = _piece_backward(d_out[:, rows], q[:, rows], k_cur[:, keys], v_cur[:, keys],
                                             out[:, rows], lse[..., rows], scale, piece_causal, deterministic)
                d_q[:, rows] += dq
                d_k_cur[:, keys] += dk
                d_v_cur[:, keys] += dv
            if incoming is not None:
                d_k_in, d_v_in = incoming()
                d_k_cur += d_k_in
                d_v_cur += d_v_in
            # The sums go on with their shard; after the last step they reach its own rank.
            incoming = ring.start([d_k_cur, d_v_cur])
            if pending_kv is not None:
                k_cur, v_cur = pending_kv()
        d_k, d_v = incoming()
        return d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype), None, None, None, None, None


def ring_flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False, *, group=None,
                         layout="zigzag", deterministic=False):
    """Attention of this rank's queries to the whole sequence's keys, the sequence split
    across the ranks of `group` (torch.distributed; None: the default group).

    q: (batch, local_seqlen, heads_q, head_dim), k, v: (batch, local_seqlen, heads_kv,
    head_dim), this rank's shard in `layout` ("zigzag": chunks rank and 2 * world_size - 1 -
    rank of 2 * world_size, local_seqlen even; "contiguous": chunk rank of world_size), the
    same local_seqlen on every rank; heads_q a multiple of heads_kv. causal applies to the
    whole sequence's positions. Differentiable in q, k, v (every rank must call backward).
    Returns out (this rank's rows), and with return_lse=True the fp32 LSE (batch, heads_q,
    local_seqlen). CUDA tensors run warpflash's kernels (bf16 or fp16); CPU tensors a float64
    PyTorch path of the same ring (tests).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"warpflash: ring_flash_attn_func: {name} must be a 4-D tensor (batch, local_seqlen, "
                             f"heads, head_dim), got {getattr(t, 'shape', type(t).__name__)}")
    if layout not in ("zigzag", "contiguous"):
        raise ValueError(f"warpflash: ring_flash_attn_func: layout = {layout!r}; allowed are 'zigzag', 'contiguous'")
    if k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]:
        raise ValueError(f"warpflash: ring_flash_attn_func: q, k, v shards must have one local_seqlen, got "
                         f"{q.shape[1]}, {k.shape[1]}, {v.shape[1]}")
    if layout == "zigzag" and q.shape[1] % 2 != 0:
        raise ValueError(f"warpflash: ring_flash_attn_func: a zigzag shard holds two equal chunks: local_seqlen "
                         f"{q.shape[1]} must be even")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("warpflash: ring_flash_attn_func needs torch.distributed initialized "
                           "(torch.distributed.init_process_group)")
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    out, lse = _RingAttention.apply(q, k, v, scale, bool(causal), layout, group, bool(deterministic))
    return (out, lse) if return_lse else out
