"""Gradients of flash_attn_func on a Hopper GPU: against autograd through the float64
reference (FlashAttention's criterion: within 2x the error of the same reference run in
the input dtype, plus a slack), GQA, masks, torch.compile(fullgraph=True) of forward and
backward, a CUDA graph of a training step, the deterministic mode (with the sinks' gradient)."""
import pytest
import torch

from conftest import requires_hopper
from test_forward import attention_reference, random_qkv, skip_unless_compiled
from warpflash import flash_attn_func

pytestmark = requires_hopper


def gradients(fn, q, k, v, d_out):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(d_out)
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, (192, 128), 256])
@pytest.mark.parametrize("shape,causal,window", [
    ((2, 256, 256, 4, 4), False, (-1, -1)), ((2, 256, 256, 4, 4), True, (-1, -1)),
    ((1, 300, 500, 8, 2), True, (-1, -1)), ((1, 129, 77, 4, 1), False, (-1, -1)),
    ((1, 500, 500, 2, 2), False, (64, 16)),
])
def test_gradients_match_the_reference(shape, causal, window, head_dim, dtype):
    skip_unless_compiled(head_dim, dtype)
    b, sq, sk, hq, hkv = shape
    q, k, v = random_qkv(shape, head_dim, dtype)
    d_out = torch.randn(b, sq, hq, v.shape[-1], device="cuda", dtype=dtype)
    scale = q.shape[-1] ** -0.5
    got = gradients(lambda q, k, v: flash_attn_func(q, k, v, causal=causal, window_size=window), q, k, v, d_out)
    want = gradients(lambda q, k, v: attention_reference(q, k, v, scale, causal, window=window)[0], q.double(),
                     k.double(), v.double(), d_out.double())
    low = gradients(lambda q, k, v: attention_reference(q, k, v, scale, causal, dtype=dtype, window=window)[0].to(dtype),
                    q, k, v, d_out)
    for name, g, w, l in zip(("dq", "dk", "dv"), got, want, low):
        assert g.shape == w.shape and g.dtype == dtype
        err = (g.double() - w).abs().max().item()
        err_low = (l.double() - w).abs().max().item()
        assert err <= 2 * err_low + 1e-3, f"{name}: max error {err} (the same math in {dtype}: {err_low})"


def test_compiled_training_step():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((2, 256, 256, 4, 2), 128, torch.bfloat16)

    @torch.compile(fullgraph=True)
    def loss(q, k, v):  # AOTAutograd traces its backward too
        return flash_attn_func(q, k, v, causal=True).float().square().mean()

    qc, kc, vc = (t.detach().requires_grad_(True) for t in (q, k, v))
    loss(qc, kc, vc).backward()
    qe, ke, ve = (t.detach().requires_grad_(True) for t in (q, k, v))
    flash_attn_func(qe, ke, ve, causal=True).float().square().mean().backward()
    for compiled, direct in ((qc, qe), (kc, ke), (vc, ve)):
        torch.testing.assert_close(compiled.grad, direct.grad)


def test_cuda_graph_of_a_training_step():
    """Forward and backward captured in one CUDA graph (the backward's kernels launch as
    programmatic dependents) and replayed on new inputs: the gradients are bitwise those
    of an eager step (deterministic mode: the same order of additions)."""
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = (t.requires_grad_(True) for t in random_qkv((2, 384, 384, 4, 2), 128, torch.bfloat16))

    def step():
        flash_attn_func(q, k, v, causal=True, deterministic=True).float().square().mean().backward()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(stream)
    for t in (q, k, v):
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    captured = [t.grad for t in (q, k, v)]
    with torch.no_grad():
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    replayed = [g.clone() for g in captured]
    for t in (q, k, v):
        t.grad = None
    step()
    for got, t in zip(replayed, (q, k, v)):
        assert torch.equal(got, t.grad)


@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, 256])
def test_deterministic_gradients_are_bitwise_identical(head_dim):
    skip_unless_compiled(head_dim, torch.bfloat16)
    q, k, v = random_qkv((2, 1000, 1000, 8, 2), head_dim, torch.bfloat16)
    d_out = torch.randn_like(q)
    first = gradients(lambda q, k, v: flash_attn_func(q, k, v, causal=True, deterministic=True), q, k, v, d_out)
    for _ in range(5):
        again = gradients(lambda q, k, v: flash_attn_func(q, k, v, causal=True, deterministic=True), q, k, v, d_out)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


def test_sink_gradient():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((1, 200, 200, 4, 2), 128, torch.bfloat16)
    sink = torch.randn(4, device="cuda")
    d_out = torch.randn_like(q)
    s1 = sink.clone().requires_grad_(True)
    flash_attn_func(q, k, v, causal=True, learnable_sink=s1).backward(d_out)
    s2 = sink.double().clone().requires_grad_(True)
    attention_reference(q, k, v, 128 ** -0.5, True, sink=s2)[0].backward(d_out.double())
    torch.testing.assert_close(s1.grad.double(), s2.grad, atol=2e-2, rtol=2e-2)


def test_deterministic_sink_gradient_is_bitwise_identical_and_matches():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((2, 700, 700, 4, 2), 128, torch.bfloat16)
    sink = torch.randn(4, device="cuda")
    d_out = torch.randn_like(q)

    def sink_gradient(deterministic):
        s = sink.clone().requires_grad_(True)
        flash_attn_func(q, k, v, causal=True, learnable_sink=s, deterministic=deterministic).backward(d_out)
        return s.grad

    first = sink_gradient(True)
    for _ in range(4):
        assert torch.equal(sink_gradient(True), first)
    torch.testing.assert_close(first, sink_gradient(False), atol=1e-3, rtol=1e-4)


def test_varlen_gradients_match_per_sequence():
    skip_unless_compiled(128, torch.bfloat16)
    from warpflash import flash_attn_varlen_func

    lengths = [100, 0, 257, 64]
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).to(torch.int32)
    total, heads_q, heads_kv, d = sum(lengths), 4, 2, 128
    q = torch.randn(total, heads_q, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(total, heads_kv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    d_out = torch.randn_like(q)
    got = gradients(lambda q, k, v: flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=True),
                    q, k, v, d_out)
    start = 0
    for n in lengths:
        if n == 0:
            continue
        rows = slice(start, start + n)
        one = lambda t: t[rows].unsqueeze(0)  # noqa: E731  (a dense batch of this sequence)
        want = gradients(lambda q, k, v: attention_reference(q, k, v, d ** -0.5, True)[0], one(q).double(),
                         one(k).double(), one(v).double(), one(d_out).double())
        low = gradients(lambda q, k, v: attention_reference(q, k, v, d ** -0.5, True, dtype=torch.bfloat16)[0]
                        .to(torch.bfloat16), one(q), one(k), one(v), one(d_out))
        for name, g, w, l in zip(("dq", "dk", "dv"), got, want, low):
            err = (g[rows].double() - w[0]).abs().max().item()
            err_low = (l[0].double() - w[0]).abs().max().item()
            assert err <= 2 * err_low + 1e-3, f"sequence of {n}: {name} max error {err} (bf16 math: {err_low})"
        start += n
