"""flash_attn_func with torch.float8_e4m3fn q, k, v (FlashAttention-3's FP8 call) on a
Hopper GPU, against a float64 reference of the dequantized inputs: the error is at most
twice that of the same attention with only P rounded to e4m3 (plus bf16's rounding of O)."""
import pytest
import torch

from conftest import requires_hopper
from test_forward import attention_reference
from warpflash import _C, flash_attn_fp8_func, flash_attn_func, flash_attn_varlen_func, quantize_fp8

pytestmark = requires_hopper

HEAD_DIMS = [64, 128, 256]
# (batch, seqlen_q, seqlen_k, heads_q, heads_kv)
SHAPES = [(1, 1, 1, 1, 1), (2, 17, 129, 2, 2), (1, 1000, 1000, 8, 2), (2, 300, 300, 4, 1), (1, 129, 4097, 2, 2)]


def skip_unless_compiled(head_dim):
    if head_dim not in _C.compiled_head_dims("float8_e4m3fn"):
        pytest.skip(f"d{head_dim} is not in this build's FP8 kernels ({_C.compiled_head_dims('float8_e4m3fn')})")


def quantized(shape, scale, heads_kv):
    """e4m3 codes of N(0, scale^2) values with one descale per (batch, K/V head) of the
    heads they hold, the descales (batch, heads_kv), and the dequantized float64 values."""
    x = torch.randn(shape, device="cuda", dtype=torch.float64) * scale
    b, s, h, d = shape
    groups = x.reshape(b, s, heads_kv, h // heads_kv, d)
    descale = (groups.abs().amax(dim=(1, 3, 4)) / 448.0).clamp_min(1e-12).float()
    codes = (groups / descale[:, None, :, None, None]).to(torch.float8_e4m3fn).reshape(shape)
    values = (codes.double().reshape(b, s, heads_kv, h // heads_kv, d) * descale[:, None, :, None, None]).reshape(shape)
    return codes, descale, values


def p_rounded_reference(q, k, v, scale, causal):
    """Exact attention but for P = exp(s - rowmax) rounded to e4m3 before P V."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    scores = (qt @ kt.transpose(-1, -2)) * scale
    if causal:
        row = torch.arange(sq, device=q.device)[:, None] + sk - sq
        scores = scores.masked_fill(torch.arange(sk, device=q.device)[None, :] > row, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
    p = torch.exp(scores - row_max)
    out = p.to(torch.float8_e4m3fn).double() @ vt / p.sum(dim=-1, keepdim=True)
    return out.nan_to_num(0.0).transpose(1, 2)


def check(out, q, k, v, scale, causal, lse=None):
    reference, reference_lse = attention_reference(q, k, v, scale, causal)
    rounded = p_rounded_reference(q, k, v, scale, causal)
    assert out.dtype == torch.bfloat16
    err = (out.double() - reference).norm() / reference.norm().clamp_min(1e-300)
    err_p = (rounded - reference).norm() / reference.norm().clamp_min(1e-300)
    assert err <= 2 * err_p + 2 ** -8, f"relative L2 error {err:.3g}, P rounded to e4m3: {err_p:.3g}"
    if lse is not None:
        finite = torch.isfinite(reference_lse)
        assert torch.allclose(lse.double()[finite], reference_lse[finite], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_fp8_with_descales(head_dim, causal, shape):
    skip_unless_compiled(head_dim)
    b, sq, sk, hq, hkv = shape
    torch.manual_seed(sum(shape) + head_dim)
    q, q_descale, q_values = quantized((b, sq, hq, head_dim), 3.0, hkv)
    k, k_descale, k_values = quantized((b, sk, hkv, head_dim), 0.5, hkv)
    v, v_descale, v_values = quantized((b, sk, hkv, head_dim), 2.0, hkv)
    scale = head_dim ** -0.5
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True, q_descale=q_descale, k_descale=k_descale,
                               v_descale=v_descale)
    check(out, q_values, k_values, v_values, scale, causal, lse)


@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_fp8_without_descales_and_compiled(head_dim):
    skip_unless_compiled(head_dim)
    torch.manual_seed(head_dim)
    q, k, v = (torch.randn(2, 257, 4, head_dim, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    out = flash_attn_func(q, k, v, causal=True)
    check(out, q.double(), k.double(), v.double(), head_dim ** -0.5, True)
    compiled = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, causal=True), fullgraph=True)
    assert torch.equal(compiled(q, k, v), out)


@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_fp8_varlen(head_dim):
    skip_unless_compiled(head_dim)
    torch.manual_seed(1 + head_dim)
    lengths = [17, 0, 300, 129]
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), device="cuda", dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = (torch.randn(total, 4, head_dim, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    out = flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=True)
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        rows = slice(int(cu[b]), int(cu[b + 1]))
        check(out[None, rows], q[None, rows].double(), k[None, rows].double(), v[None, rows].double(),
              head_dim ** -0.5, True)


def test_fp8_errors_name_the_argument():
    skip_unless_compiled(128)
    q = torch.randn(1, 64, 2, 128, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="q_descale has shape"):
        flash_attn_func(q, q, q, q_descale=torch.ones(3, device="cuda"))
    with pytest.raises(TypeError, match="k_descale has dtype torch.float16"):
        flash_attn_func(q, q, q, k_descale=torch.ones(1, 2, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="softcap"):
        flash_attn_func(q, q, q, softcap=5.0)
    q16 = q.to(torch.bfloat16)
    with pytest.raises(TypeError, match="descales are for torch.float8_e4m3fn"):
        flash_attn_func(q16, q16, q16, v_descale=torch.ones(1, 2, device="cuda"))


@pytest.mark.parametrize("hadamard", [False, True], ids=["plain", "hadamard"])
@pytest.mark.parametrize("block_rows", [0, 64, 128])
def test_quantize_fp8_feeds_the_fp8_attention(block_rows, hadamard):
    """quantize_fp8's codes times its scales give x back to e4m3's precision (after the
    transform, which is orthogonal: q k^T stays), and per-(batch, head) scales are the
    descales flash_attn_func takes (MHA)."""
    torch.manual_seed(block_rows + hadamard)
    q, k, v = (torch.randn(2, 300, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    codes, scales = quantize_fp8(q, block_rows=block_rows, hadamard=hadamard, seed=7)
    blocks = 1 if block_rows == 0 else -(-300 // block_rows)
    assert codes.dtype == torch.float8_e4m3fn and scales.shape == (2, 4, blocks)
    rows = 300 if block_rows == 0 else block_rows
    per_row = scales.repeat_interleave(rows, dim=2)[:, :, :300].transpose(1, 2)[..., None]
    restored = codes.float() * per_row
    if not hadamard:
        assert (restored - q.float()).abs().max() <= 2 ** -4 * q.float().abs().max() + 1e-6
    else:  # an orthogonal transform keeps each row's norm
        assert torch.allclose(restored.norm(dim=-1), q.float().norm(dim=-1), rtol=0.05)
    if block_rows == 0:
        qc, qs = quantize_fp8(q, hadamard=hadamard, seed=7)
        kc, ks = quantize_fp8(k, hadamard=hadamard, seed=7)
        vc, vs = quantize_fp8(v)
        out = flash_attn_func(qc, kc, vc, causal=True, q_descale=qs[..., 0], k_descale=ks[..., 0],
                              v_descale=vs[..., 0])
        reference, _ = attention_reference(q.double(), k.double(), v.double(), 128 ** -0.5, True)
        err = (out.double() - reference).norm() / reference.norm()
        assert err < 0.05, f"relative L2 error {err:.3g} of quantize_fp8 + FP8 attention"


def block_varying(shape, max_exponent):
    """bf16 N(0, 1) values whose magnitude changes every 32 rows of each head
    (2^-max_exponent..2^max_exponent), so that a block scale applied to the wrong rows shows.
    (Larger logits than a few tens would test the FP8 WGMMA's accumulation, which keeps less
    than fp32's precision, not the scales.)"""
    b, s, h, d = shape
    x = torch.randn(shape, device="cuda", dtype=torch.float64)
    exponents = torch.randint(-max_exponent, max_exponent + 1, (b, -(-s // 32), h, 1),
                              device="cuda").repeat_interleave(32, dim=1)[:, :s]
    return (x * torch.exp2(exponents.double())).to(torch.bfloat16)


def dequantized(codes, scales, block_rows):
    """codes (b, s, h, d) times their (b, h, blocks) scales, float64."""
    s = codes.shape[1]
    rows = s if block_rows == 0 else block_rows
    per_row = scales.double().repeat_interleave(rows, dim=2)[:, :, :s].transpose(1, 2)[..., None]
    return codes.double() * per_row


@pytest.mark.parametrize("rows", [(64, 128), (128, 128), (0, 0), (64, 0)], ids=lambda r: f"q{r[0]}_kv{r[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_fp8_block_scales(head_dim, causal, rows):
    """quantize_fp8's per-block (or per-(batch, head)) scales passed as they are: the kernel
    against the reference of codes times scales, GQA, seqlen_q != seqlen_k."""
    skip_unless_compiled(head_dim)
    q_rows, kv_rows = rows
    torch.manual_seed(head_dim + q_rows + kv_rows + causal)
    q, k = block_varying((2, 700, 4, head_dim), 1), block_varying((2, 1000, 2, head_dim), 1)
    v = block_varying((2, 1000, 2, head_dim), 3)
    (qc, qs), (kc, ks), (vc, vs) = (quantize_fp8(x, block_rows=r) for x, r in ((q, q_rows), (k, kv_rows), (v, kv_rows)))
    out, lse = flash_attn_func(qc, kc, vc, causal=causal, return_lse=True, q_descale=qs, k_descale=ks, v_descale=vs)
    check(out, dequantized(qc, qs, q_rows), dequantized(kc, ks, kv_rows), dequantized(vc, vs, kv_rows),
          head_dim ** -0.5, causal, lse)


@pytest.mark.parametrize("recipe", [(True, True), (True, False), (False, True), (False, False)],
                         ids=["block_hadamard", "block", "head_hadamard", "head"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_flash_attn_fp8_func(head_dim, recipe):
    """The paper's recipe from bf16 / fp16 inputs: close to exact attention of those inputs,
    q's dtype out, GQA; under torch.compile the same result."""
    skip_unless_compiled(head_dim)
    block_quant, hadamard = recipe
    torch.manual_seed(head_dim + 2 * block_quant + hadamard)
    for dtype in (torch.bfloat16, torch.float16):
        q = torch.randn(2, 513, 8, head_dim, device="cuda", dtype=dtype)
        k, v = (torch.randn(2, 777, 2, head_dim, device="cuda", dtype=dtype) for _ in range(2))
        out, lse = flash_attn_fp8_func(q, k, v, causal=True, return_lse=True, block_quant=block_quant,
                                       hadamard=hadamard, seed=3)
        assert out.dtype == dtype and out.shape == q.shape and lse.shape == (2, 8, 513)
        # The same as quantize_fp8 and flash_attn_func by hand, to the bit.
        q_rows, kv_rows = (64, 128) if block_quant else (0, 0)
        (qc, qs), (kc, ks) = (quantize_fp8(x, block_rows=r, hadamard=hadamard, seed=3)
                              for x, r in ((q, q_rows), (k, kv_rows)))
        vc, vs = quantize_fp8(v, block_rows=kv_rows)
        by_hand = flash_attn_func(qc, kc, vc, causal=True, q_descale=qs, k_descale=ks, v_descale=vs)
        assert torch.equal(out, by_hand.to(dtype))
        # FP8's error on N(0, 1) inputs: about 5% of O's norm (e4m3 keeps 3 mantissa bits).
        reference, reference_lse = attention_reference(q.double(), k.double(), v.double(), head_dim ** -0.5, True)
        err = (out.double() - reference).norm() / reference.norm()
        assert err < 0.08, f"relative L2 error {err:.3g} of {dtype} through FP8"
        assert torch.allclose(lse.double(), reference_lse, atol=0.15)
    torch._dynamo.reset()  # one compilation per parameter set, not a recompilation of the last
    compiled = torch.compile(lambda q, k, v: flash_attn_fp8_func(q, k, v, causal=True, block_quant=block_quant,
                                                                 hadamard=hadamard, seed=3), fullgraph=True)
    assert torch.equal(compiled(q, k, v), flash_attn_fp8_func(q, k, v, causal=True, block_quant=block_quant,
                                                              hadamard=hadamard, seed=3))


def test_fp8_block_scale_errors_name_the_argument():
    skip_unless_compiled(128)
    q = torch.randn(1, 300, 2, 128, device="cuda", dtype=torch.bfloat16)
    qc, _ = quantize_fp8(q, block_rows=64)
    with pytest.raises(ValueError, match=r"q_descale has shape \(1, 2, 4\); per-block scales are \(1, 2, num_blocks\)"):
        flash_attn_func(qc, qc, qc, q_descale=torch.ones(1, 2, 4, device="cuda"))
    with pytest.raises(ValueError, match="k_descale has shape"):  # k's blocks are 128 rows
        flash_attn_func(qc, qc, qc, k_descale=torch.ones(1, 2, 5, device="cuda"))
    with pytest.raises(ValueError, match="different block sizes"):
        flash_attn_func(qc, qc, qc, k_descale=torch.ones(1, 2, 3, device="cuda"),
                        v_descale=torch.ones(1, 2, 1, device="cuda"))
    cu = torch.tensor([0, 300], device="cuda", dtype=torch.int32)
    with pytest.raises(ValueError, match="per-block scales are for dense batches"):
        flash_attn_varlen_func(qc[0], qc[0], qc[0], cu, cu, 300, 300, q_descale=torch.ones(1, 2, 5, device="cuda"))
    with pytest.raises(TypeError, match="flash_attn_fp8_func takes float16 or bfloat16"):
        flash_attn_fp8_func(qc, qc, qc)
