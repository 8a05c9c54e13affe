"""Ring attention (warpflash.distributed): the zigzag layout, the LSE merge, and the whole
ring forward and backward on 2-3 ranks against attention of the whole sequence in one
process. On CPU (gloo, the float64 path of the same ring: runs in CI); on 2+ Hopper GPUs
(NCCL, warpflash's kernels) where a machine has them."""
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from conftest import hopper_unavailable_reason
from test_forward import attention_reference
from warpflash.distributed import merge_partials, ring_flash_attn_func, zigzag_shard, zigzag_unshard


def test_zigzag_shards_put_the_sequence_back_together():
    x = torch.arange(2 * 24 * 3).reshape(2, 24, 3)
    for world_size in (1, 2, 3):
        parts = [zigzag_shard(x, world_size, rank) for rank in range(world_size)]
        assert all(p.shape == (2, 24 // world_size, 3) for p in parts)
        assert torch.equal(zigzag_unshard(parts), x)
    # Rank 0 of 2 holds the first and the last quarter.
    assert torch.equal(zigzag_shard(x, 2, 0)[0, :, 0], torch.cat([x[0, :6, 0], x[0, 18:, 0]]))
    with pytest.raises(ValueError, match="not a multiple of 2 \\* world_size = 6"):
        zigzag_shard(x[:, :20], 3, 0)


def test_merge_of_two_key_sets_is_attention_over_both():
    torch.manual_seed(0)
    q = torch.randn(2, 9, 4, 16, dtype=torch.float64)
    k, v = torch.randn(2, 30, 2, 16, dtype=torch.float64), torch.randn(2, 30, 2, 16, dtype=torch.float64)
    whole, whole_lse = attention_reference(q, k, v, 0.25, False)
    first, first_lse = attention_reference(q, k[:, :11], v[:, :11], 0.25, False)
    rest, rest_lse = attention_reference(q, k[:, 11:], v[:, 11:], 0.25, False)
    out, lse = merge_partials(*merge_partials(None, None, first, first_lse), rest, rest_lse)
    assert torch.allclose(out, whole, atol=1e-12) and torch.allclose(lse, whole_lse, atol=1e-12)
    # A part whose rows saw no key (lse -inf) adds nothing.
    empty_lse = torch.full_like(whole_lse, float("-inf"))
    out, lse = merge_partials(whole, whole_lse, torch.zeros_like(whole), empty_lse)
    assert torch.equal(out, whole) and torch.equal(lse, whole_lse)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world_size, port, backend, case, result_dir):
    """One rank: its shard of the case's inputs through the ring, forward and backward; saves
    its out, lse and gradients for the parent to compare."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(device)
        q, k, v, d_out = (t.to(device) for t in case["tensors"])
        shard = (lambda x: zigzag_shard(x, world_size, rank)) if case["layout"] == "zigzag" else (
            lambda x: x.chunk(world_size, dim=1)[rank])
        q_s, k_s, v_s = (shard(t).detach().clone().requires_grad_() for t in (q, k, v))
        out, lse = ring_flash_attn_func(q_s, k_s, v_s, causal=case["causal"], return_lse=True,
                                        layout=case["layout"])
        out.backward(shard(d_out))
        torch.save({name: t.detach().cpu() for name, t in
                    (("out", out), ("lse", lse), ("dq", q_s.grad), ("dk", k_s.grad), ("dv", v_s.grad))},
                   os.path.join(result_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _run_ring(world_size, backend, case):
    with tempfile.TemporaryDirectory() as result_dir:
        mp.spawn(_rank_main, args=(world_size, _free_port(), backend, case, result_dir), nprocs=world_size)
        parts = [torch.load(os.path.join(result_dir, f"rank{r}.pt")) for r in range(world_size)]
    if case["layout"] == "zigzag":
        return {name: zigzag_unshard([p[name] for p in parts], dim=2 if name == "lse" else 1) for name in parts[0]}
    return {name: torch.cat([p[name] for p in parts], dim=2 if name == "lse" else 1) for name in parts[0]}


def _whole_sequence(case):
    """out, lse and gradients of the whole sequence's attention in one process, float64."""
    q, k, v, d_out = (t.to(torch.float64).requires_grad_(i < 3) for i, t in enumerate(case["tensors"]))
    out, lse = attention_reference(q, k, v, q.shape[-1] ** -0.5, case["causal"])
    out.backward(d_out)
    return {"out": out.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def _case(seqlen, heads_q, heads_kv, causal, layout, dtype, head_dim=32):
    """q, k, v and d_out of the whole sequence (batch 2), on the CPU."""
    torch.manual_seed(seqlen + heads_q + causal)
    tensors = [torch.randn(2, seqlen, heads, head_dim, dtype=dtype) for heads in (heads_q, heads_kv, heads_kv, heads_q)]
    return {"tensors": tensors, "causal": causal, "layout": layout}


@pytest.mark.parametrize("world_size, layout, causal", [(2, "zigzag", True), (2, "zigzag", False),
                                                        (2, "contiguous", True), (3, "zigzag", True),
                                                        (3, "contiguous", True)])
def test_ring_on_cpu_ranks_equals_one_process(world_size, layout, causal):
    """gloo ranks on the CPU, float64: the ring's out, LSE and gradients equal the whole
    sequence's attention to rounding (GQA 4/2)."""
    case = _case(12 * world_size, 4, 2, causal, layout, torch.float64)
    got, want = _run_ring(world_size, "gloo", case), _whole_sequence(case)
    for name in ("out", "lse", "dq", "dk", "dv"):
        diff = (got[name] - want[name]).abs().max()
        assert diff <= 1e-10, f"{name}: max diff {diff}"


def _gpus_unavailable():
    reason = hopper_unavailable_reason()
    if reason is None and torch.cuda.device_count() < 2:
        reason = f"{torch.cuda.device_count()} GPU, ring attention on GPUs needs 2"
    return reason


@pytest.mark.skipif(_gpus_unavailable() is not None, reason=f"GPU test skipped: {_gpus_unavailable()}")
@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_ring_on_gpus_within_flash_attention_error(layout):
    """NCCL ranks on Hopper GPUs with warpflash's kernels, bf16: the error against the
    float64 whole-sequence attention is within twice that of one process's bf16 attention
    (FlashAttention's criterion)."""
    world_size = min(torch.cuda.device_count(), 4)
    case = _case(1024 * world_size, 8, 2, True, layout, torch.bfloat16, head_dim=128)
    got, want = _run_ring(world_size, "nccl", case), _whole_sequence(case)
    q, k, v, d_out = (t.cuda().requires_grad_(i < 3) for i, t in enumerate(case["tensors"]))
    one, _ = attention_reference(q, k, v, 128 ** -0.5, True, dtype=torch.bfloat16)
    one.backward(d_out)
    single = {"out": one.detach().cpu(), "dq": q.grad.cpu(), "dk": k.grad.cpu(), "dv": v.grad.cpu()}
    for name in ("out", "dq", "dk", "dv"):
        err = (got[name].double() - want[name]).abs().max()
        err_single = (single[name].double() - want[name]).abs().max()
        assert err <= 2 * err_single + 1e-3, f"{name}: {err:.3g}, one process's bf16 attention {err_single:.3g}"
