"""flash_attn_func on a Hopper GPU against a float64 PyTorch reference: awkward shapes,
torch.compile, non-default streams, CUDA graphs, and errors that need the library."""
import math

import pytest
import torch

from conftest import requires_hopper
from warpflash import flash_attn_func

pytestmark = requires_hopper

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv)
SHAPES = [(1, 1, 1, 1, 1), (2, 17, 17, 4, 4), (1, 127, 129, 2, 2), (1, 1000, 1000, 4, 1), (1, 4097, 4097, 2, 2),
          (2, 113, 203, 8, 1), (1, 203, 113, 8, 2), (7, 64, 300, 16, 2), (1, 1, 1000, 4, 4),
          (4, 1000, 1000, 8, 2), (2, 900, 300, 16, 2)]  # more tiles than SMs (persistent CTAs)


def attention_reference(q, k, v, scale, causal, dtype=torch.float64):
    """softmax(q k^T * scale) v with matmuls in `dtype` and the softmax in float32 or better;
    returns out (in q's layout) and lse. Rows that see no key give 0 and -inf."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qt = q.to(dtype).transpose(1, 2)
    kt = k.to(dtype).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vt = v.to(dtype).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    scores = (qt @ kt.transpose(-1, -2)).to(torch.promote_types(dtype, torch.float32)) * scale
    if causal:
        row = torch.arange(sq, device=q.device)[:, None]
        col = torch.arange(sk, device=q.device)[None, :]
        scores = scores.masked_fill(col > row + sk - sq, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    out = probs.to(dtype) @ vt
    return out.transpose(1, 2), lse


def random_qkv(shape, head_dim, dtype, layout="bshd"):
    b, sq, sk, hq, hkv = shape
    make = lambda s, h: torch.randn(b, s, h, head_dim, device="cuda", dtype=dtype)
    q, k, v = make(sq, hq), make(sk, hkv), make(sk, hkv)
    if layout == "bhsd":  # same values, stored (batch, heads, seqlen, head_dim) as SDPA users keep them
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    return q, k, v


def check_against_reference(q, k, v, causal, out, lse, scale=None):
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out_ref, lse_ref = attention_reference(q, k, v, scale, causal)
    out_pt, _ = attention_reference(q, k, v, scale, causal, dtype=q.dtype)
    # FlashAttention's criterion: within 2x the error of attention in the input precision.
    atol = 2 ** -9 if q.dtype == torch.bfloat16 else 2 ** -12  # twice the rounding of a value near 0.3
    err, err_pt = (out.double() - out_ref).abs().max().item(), (out_pt.double() - out_ref).abs().max().item()
    assert not out.isnan().any()
    assert err <= 2 * err_pt + atol, f"max error {err:.3g}, PyTorch in {q.dtype}: {err_pt:.3g}"
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isinf(lse), ~finite)
    torch.testing.assert_close(lse[finite].double(), lse_ref[finite], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_q{}_k{}_h{}_kv{}".format(*s))
def test_matches_reference(shape, head_dim, causal, dtype):
    q, k, v = random_qkv(shape, head_dim, dtype)
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
    check_against_reference(q, k, v, causal, out, lse)


@pytest.mark.parametrize("causal", [False, True])
def test_strided_inputs_and_custom_scale(causal):
    q, k, v = random_qkv((2, 300, 257, 8, 2), 128, torch.bfloat16, layout="bhsd")
    assert not q.is_contiguous()
    out, lse = flash_attn_func(q, k, v, softmax_scale=0.05, causal=causal, return_lse=True)
    check_against_reference(q, k, v, causal, out, lse, scale=0.05)


def test_torch_compile():
    q, k, v = random_qkv((2, 256, 256, 8, 2), 128, torch.bfloat16)

    @torch.compile(fullgraph=True)
    def layer(q, k, v):
        return flash_attn_func(q * 2, k, v, causal=True) + 1

    out = layer(q, k, v)
    torch.testing.assert_close(out, flash_attn_func(q * 2, k, v, causal=True) + 1)


def test_runs_on_the_current_stream():
    q, k, v = random_qkv((4, 1024, 1024, 16, 16), 128, torch.bfloat16)
    expected = flash_attn_func(q, k, v)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(10_000_000)  # a busy stream: a kernel on another stream would read early
        out = flash_attn_func(q, k, v)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [128, 256])
def test_split_last_round(head_dim, dtype):
    """Long non-causal problems split the last round's tiles along the keys, with scratch
    from PyTorch's allocator and a merge kernel: here 12 units of two tiles on all clusters."""
    q, k, v = random_qkv((1, 700, 16000, 4, 2), head_dim, dtype)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    check_against_reference(q, k, v, False, out, lse)


def test_cuda_graph_capture():
    q, k, v = random_qkv((2, 512, 512, 8, 8), 64, torch.float16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        flash_attn_func(q, k, v, causal=True)  # warm-up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attn_func(q, k, v, causal=True)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, flash_attn_func(q, k, v, causal=True), rtol=0, atol=0)


def test_unsupported_head_dim_names_the_compiled_ones():
    q, k, v = random_qkv((1, 64, 64, 2, 2), 96, torch.bfloat16)
    with pytest.raises(ValueError, match=r"head_dim = 96 is not supported.*\{64, 128, 256\}"):
        flash_attn_func(q, k, v)


def test_misaligned_strides_are_a_value_error():
    base = torch.randn(1, 64, 1, 128 + 4, device="cuda", dtype=torch.bfloat16)
    q = base[..., :128]  # rows 264 bytes apart: not a multiple of 16
    with pytest.raises(ValueError, match=r"q\.seqlen_stride = 132 elements"):
        flash_attn_func(q, q, q)


def test_empty_batch():
    q, k, v = random_qkv((0, 64, 64, 2, 2), 128, torch.bfloat16)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    assert out.shape == q.shape and lse.shape == (0, 2, 64)


def test_bad_softmax_scale():
    q, k, v = random_qkv((1, 64, 64, 2, 2), 128, torch.bfloat16)
    with pytest.raises(ValueError, match="softmax_scale"):
        flash_attn_func(q, k, v, softmax_scale=float("nan"))


def test_opcheck():
    """PyTorch's own consistency checks of a custom op: schema, fake (meta) function
    against the real kernel, dispatcher registration."""
    q, k, v = random_qkv((2, 200, 300, 8, 2), 128, torch.bfloat16)
    torch.library.opcheck(torch.ops.warpflash.forward, (q, k, v, 0.1, True))
