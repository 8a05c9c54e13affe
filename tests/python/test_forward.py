"""flash_attn_func on a Hopper GPU against a float64 PyTorch reference: awkward shapes,
torch.compile, non-default streams, CUDA graphs, and errors that need the library."""
import math

import pytest
import torch

from conftest import requires_hopper
from warpflash import _C, flash_attn_func, flash_attn_varlen_func

pytestmark = requires_hopper

# (head_dim of q and k, head_dim_v of v and out)
HEAD_DIMS = [(64, 64), (96, 96), (128, 128), (192, 192), (192, 128), (256, 256)]
HEAD_DIM_IDS = ["d{}".format(d) if d == dv else "d{}_v{}".format(d, dv) for d, dv in HEAD_DIMS]


def skip_unless_compiled(head_dims, dtype):
    if isinstance(head_dims, int):
        head_dims = (head_dims, head_dims)
    compiled = [tuple(p) for p in _C.compiled_head_dim_pairs(str(dtype).removeprefix("torch."))]
    if tuple(head_dims) not in compiled:
        pytest.skip(f"head dims {head_dims} are not in this build ({compiled})")

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv)
SHAPES = [(1, 1, 1, 1, 1), (2, 17, 17, 4, 4), (1, 127, 129, 2, 2), (1, 1000, 1000, 4, 1), (1, 4097, 4097, 2, 2),
          (2, 113, 203, 8, 1), (1, 203, 113, 8, 2), (7, 64, 300, 16, 2), (1, 1, 1000, 4, 4),
          (4, 1000, 1000, 8, 2), (2, 900, 300, 16, 2)]  # more tiles than SMs (persistent CTAs)


def attention_reference(q, k, v, scale, causal, dtype=torch.float64, window=(-1, -1), softcap=0.0, sink=None):
    """softmax(q k^T * scale) v with matmuls in `dtype` and the softmax in float32 or better;
    returns out (in q's layout) and lse. Rows that see no key give 0 and -inf (or the sink)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qt = q.to(dtype).transpose(1, 2)
    kt = k.to(dtype).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vt = v.to(dtype).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    scores = (qt @ kt.transpose(-1, -2)).to(torch.promote_types(dtype, torch.float32)) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    left, right = window[0], 0 if causal else window[1]
    row = torch.arange(sq, device=q.device)[:, None] + sk - sq
    col = torch.arange(sk, device=q.device)[None, :]
    if right >= 0:
        scores = scores.masked_fill(col > row + right, float("-inf"))
    if left >= 0:
        scores = scores.masked_fill(col < row - left, float("-inf"))
    if sink is not None:  # one more logit per head, without a value row
        sink_column = sink.to(scores.dtype)[None, :, None, None].expand(b, hq, sq, 1)
        lse = torch.logsumexp(torch.cat([scores, sink_column], dim=-1), dim=-1)
    else:
        lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    out = probs.to(dtype) @ vt
    return out.transpose(1, 2), lse


def random_qkv(shape, head_dim, dtype, layout="bshd"):
    """head_dim: an int, or (head_dim, head_dim_v) for a v of its own width."""
    b, sq, sk, hq, hkv = shape
    head_dim, head_dim_v = (head_dim, head_dim) if isinstance(head_dim, int) else head_dim
    make = lambda s, h, d: torch.randn(b, s, h, d, device="cuda", dtype=dtype)
    q, k, v = make(sq, hq, head_dim), make(sk, hkv, head_dim), make(sk, hkv, head_dim_v)
    if layout == "bhsd":  # same values, stored (batch, heads, seqlen, head_dim) as SDPA users keep them
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    return q, k, v


def output_rounding(dtype, largest_output):
    """Half a unit in the last place of the largest output in `dtype`, at least that of values
    in [0.5, 1) (tests/common/output_tolerance.h): the rounding of O the kernel pays in full."""
    mantissa_bits = 7 if dtype == torch.bfloat16 else 10
    exponent = math.frexp(max(largest_output, 0.5))[1]
    return 2.0 ** (exponent - 2 - mantissa_bits)


def check_against_reference(q, k, v, causal, out, lse, scale=None, **options):
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out_ref, lse_ref = attention_reference(q, k, v, scale, causal, **options)
    out_pt, _ = attention_reference(q, k, v, scale, causal, dtype=q.dtype, **options)
    # FlashAttention's criterion: within 2x the error of attention in the input precision.
    atol = output_rounding(q.dtype, out_ref.abs().max().item() if out_ref.numel() else 0.0)
    err, err_pt = (out.double() - out_ref).abs().max().item(), (out_pt.double() - out_ref).abs().max().item()
    assert not out.isnan().any()
    assert err <= 2 * err_pt + atol, f"max error {err:.3g}, PyTorch in {q.dtype}: {err_pt:.3g}"
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isinf(lse), ~finite)
    torch.testing.assert_close(lse[finite].double(), lse_ref[finite], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dims", HEAD_DIMS, ids=HEAD_DIM_IDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_q{}_k{}_h{}_kv{}".format(*s))
def test_matches_reference(shape, head_dims, causal, dtype):
    skip_unless_compiled(head_dims, dtype)
    q, k, v = random_qkv(shape, head_dims, dtype)
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True)
    assert out.shape == (*q.shape[:3], v.shape[3]) and out.dtype == dtype
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
    check_against_reference(q, k, v, causal, out, lse)


@pytest.mark.parametrize("causal", [False, True])
def test_strided_inputs_and_custom_scale(causal):
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((2, 300, 257, 8, 2), 128, torch.bfloat16, layout="bhsd")
    assert not q.is_contiguous()
    out, lse = flash_attn_func(q, k, v, softmax_scale=0.05, causal=causal, return_lse=True)
    check_against_reference(q, k, v, causal, out, lse, scale=0.05)


def test_torch_compile():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((2, 256, 256, 8, 2), 128, torch.bfloat16)

    @torch.compile(fullgraph=True)
    def layer(q, k, v):
        return flash_attn_func(q * 2, k, v, causal=True) + 1

    out = layer(q, k, v)
    torch.testing.assert_close(out, flash_attn_func(q * 2, k, v, causal=True) + 1)


def test_runs_on_the_current_stream():
    skip_unless_compiled(128, torch.bfloat16)
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
    skip_unless_compiled(head_dim, dtype)
    q, k, v = random_qkv((1, 700, 16000, 4, 2), head_dim, dtype)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    check_against_reference(q, k, v, False, out, lse)


def test_cuda_graph_capture():
    skip_unless_compiled(64, torch.float16)
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
    q, k, v = random_qkv((1, 64, 64, 2, 2), 80, torch.bfloat16)
    compiled = ", ".join(str(d) if d == dv else f"{d}/{dv}" for d, dv in _C.compiled_head_dim_pairs("bfloat16"))
    with pytest.raises(ValueError, match=r"head_dim = 80 is not supported.*\{" + compiled + r"\}"):
        flash_attn_func(q, k, v)
    q, k, v = random_qkv((1, 64, 64, 2, 2), (128, 64), torch.bfloat16)
    with pytest.raises(ValueError, match=r"head_dim = 128 with head_dim_v = 64 is not supported"):
        flash_attn_func(q, k, v)


def test_misaligned_strides_are_a_value_error():
    base = torch.randn(1, 64, 1, 128 + 4, device="cuda", dtype=torch.bfloat16)
    q = base[..., :128]  # rows 264 bytes apart: not a multiple of 16
    with pytest.raises(ValueError, match=r"q\.seqlen_stride = 132 elements"):
        flash_attn_func(q, q, q)


def test_empty_batch():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((0, 64, 64, 2, 2), 128, torch.bfloat16)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    assert out.shape == q.shape and lse.shape == (0, 2, 64)


def test_bad_softmax_scale():
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((1, 64, 64, 2, 2), 128, torch.bfloat16)
    with pytest.raises(ValueError, match="softmax_scale"):
        flash_attn_func(q, k, v, softmax_scale=float("nan"))


def test_opcheck():
    """PyTorch's own consistency checks of a custom op: schema, fake (meta) function
    against the real kernel, dispatcher registration."""
    skip_unless_compiled(128, torch.bfloat16)
    q, k, v = random_qkv((2, 200, 300, 8, 2), 128, torch.bfloat16)
    torch.library.opcheck(torch.ops.warpflash.forward,
                          (q, k, v, None, None, None, None, 0, 0, 0.1, True, -1, -1, 0, 0.0, None))
    lengths = torch.tensor([0, 100, 300, 301], dtype=torch.int32, device="cuda")
    qp, kp, vp = (t.reshape(-1, *t.shape[2:])[:301] for t in (q, k, v))
    torch.library.opcheck(torch.ops.warpflash.forward,
                          (qp, kp, vp, lengths, lengths, None, None, 200, 200, 0.1, True, 64, -1, 0, 30.0,
                           torch.zeros(8, device="cuda")))


def test_test_names_are_the_compiled_head_dims():
    assert {tuple(p) for p in _C.compiled_head_dim_pairs("bfloat16")} <= set(HEAD_DIMS)


# The masks, softcap and sinks of flash_attn_func against the PyTorch reference.
FEATURES = {
    "window_causal": dict(causal=True, window_size=(100, -1)),
    "window_both": dict(window_size=(40, 25)),
    "softcap": dict(causal=True, softcap=30.0),
    "sinks": dict(causal=True, sink=True),
    "all": dict(causal=True, window_size=(64, -1), softcap=20.0, sink=True),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=HEAD_DIM_IDS)
@pytest.mark.parametrize("feature", FEATURES)
def test_masks_softcap_sinks(feature, head_dim, dtype):
    skip_unless_compiled(head_dim, dtype)
    options = dict(FEATURES[feature])
    causal = options.pop("causal", False)
    sink = torch.randn(8, device="cuda") if options.pop("sink", False) else None
    q, k, v = random_qkv((2, 300, 500, 8, 2), head_dim, dtype)
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True, learnable_sink=sink, **options)
    check_against_reference(q, k, v, causal, out, lse, window=options.get("window_size", (-1, -1)),
                            softcap=options.get("softcap", 0.0), sink=sink)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dims", HEAD_DIMS, ids=HEAD_DIM_IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_each_sequence(causal, head_dims, dtype):
    """Packed sequences (with an empty one and lengths around the tile edges) give what
    each sequence gives alone; lse is (heads, total_q)."""
    skip_unless_compiled(head_dims, dtype)
    head_dim, head_dim_v = head_dims
    lengths_q, lengths_k = [129, 0, 1, 300, 128], [129, 5, 1, 700, 127]
    cu_q = torch.tensor([0] + lengths_q, device="cuda").cumsum(0).int()
    cu_k = torch.tensor([0] + lengths_k, device="cuda").cumsum(0).int()
    q = torch.randn(sum(lengths_q), 8, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(sum(lengths_k), 2, head_dim, device="cuda", dtype=dtype)
    v = torch.randn(sum(lengths_k), 2, head_dim_v, device="cuda", dtype=dtype)
    sink = torch.randn(8, device="cuda")
    out, lse = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal,
                                      window_size=(200, -1), learnable_sink=sink, return_lse=True)
    assert out.shape == (*q.shape[:2], head_dim_v) and lse.shape == (8, q.shape[0])
    for b in range(len(lengths_q)):
        rows_q, rows_k = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lengths_q[b] == 0:
            continue
        check_against_reference(q[None, rows_q], k[None, rows_k], v[None, rows_k], causal, out[None, rows_q],
                                lse[None, :, rows_q], window=(200, -1), sink=sink)


def test_varlen_torch_compile():
    skip_unless_compiled(128, torch.bfloat16)
    cu = torch.tensor([0, 100, 356], dtype=torch.int32, device="cuda")
    q = torch.randn(356, 8, 128, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q[:, :2]), torch.randn_like(q[:, :2])

    @torch.compile(fullgraph=True)
    def layer(q, k, v):
        return flash_attn_varlen_func(q, k, v, cu, cu, 256, 256, causal=True) * 2

    torch.testing.assert_close(layer(q, k, v), flash_attn_varlen_func(q, k, v, cu, cu, 256, 256, causal=True) * 2)


def test_varlen_errors():
    q = torch.randn(100, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(100, 2, 128, device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0, 40, 100], dtype=torch.int32, device="cuda")
    with pytest.raises(TypeError, match="cu_seqlens_q has dtype torch.int64"):
        flash_attn_varlen_func(q, k, k, cu.long(), cu, 60, 60)
    with pytest.raises(ValueError, match=r"cu_seqlens_k has shape \(2,\); expected \(3,\)"):
        flash_attn_varlen_func(q, k, k, cu, cu[:2], 60, 60)
    with pytest.raises(ValueError, match="cu_seqlens_q is on cpu"):
        flash_attn_varlen_func(q, k, k, cu.cpu(), cu, 60, 60)
    with pytest.raises(ValueError, match="3-D"):
        flash_attn_varlen_func(q[None], k, k, cu, cu, 60, 60)
    with pytest.raises(ValueError, match=r"learnable_sink has shape \(4,\)"):
        flash_attn_func(q[None], k[None], k[None], learnable_sink=torch.zeros(4, device="cuda"))
