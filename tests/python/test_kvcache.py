"""flash_attn_with_kvcache on a Hopper GPU against a float64 PyTorch reference: decode
with GQA (packed query heads) and split keys, speculative and chunked-prefill queries,
paged caches with random page tables, new tokens appended in place with
rotary embedding, the LSE, CUDA graphs, and errors."""
import pytest
import torch

from conftest import requires_hopper
from test_forward import attention_reference, skip_unless_compiled
from warpflash import apply_rotary, flash_attn_varlen_func, flash_attn_with_kvcache

pytestmark = requires_hopper


def reference_over_cache(q, k_cache, v_cache, seqused, scale, causal, dtype=torch.float64):
    """out, lse of each sequence over its first seqused[b] cache rows (matmuls in dtype)."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = int(seqused[b])
        out, lse = attention_reference(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], scale, causal,
                                       dtype=dtype)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def check_over_cache(out, q, k_cache, v_cache, seqused, scale, causal):
    """check_close against reference_over_cache in float64 and in q's precision."""
    ref, _ = reference_over_cache(q, k_cache, v_cache, seqused, scale, causal)
    low, _ = reference_over_cache(q, k_cache, v_cache, seqused, scale, causal, dtype=q.dtype)
    check_close(out, ref, low, "out")


def check_close(out, ref, low, what):
    """FlashAttention's criterion: error at most twice that of attention in the input precision."""
    err = (out.double() - ref).abs().max().item()
    err_low = (low.double() - ref).abs().max().item()
    assert err <= 2 * err_low + 1e-3, f"{what}: max error {err}, low-precision reference {err_low}"


# (batch, seqlen_q, seqlen_cache, heads_q, heads_kv)
DECODE_SHAPES = [(4, 1, 777, 32, 8), (3, 1, 5000, 12, 4), (1, 1, 3000, 16, 1), (2, 4, 3001, 8, 2),
                 (2, 1, 300, 8, 8), (2, 77, 1024, 8, 2)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("shape", DECODE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_splits", [0, 1, 5])
def test_decode_over_cache(dtype, head_dim, shape, causal, num_splits):
    skip_unless_compiled(head_dim, dtype)
    batch, sq, s_cache, hq, hkv = shape
    torch.manual_seed(sum(shape) + head_dim + num_splits)
    q = torch.randn(batch, sq, hq, head_dim, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    # Lengths around tile edges, one sequence without keys when there are several.
    lengths = [s_cache, 129, 1, 0][:batch] if batch > 1 else [s_cache - 5]
    lengths = [max(n, sq) if causal else n for n in lengths]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    scale = head_dim ** -0.5
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens, causal=causal,
                                       num_splits=num_splits, return_softmax_lse=True)
    ref, lse_ref = reference_over_cache(q, k_cache, v_cache, lengths, scale, causal)
    low, _ = reference_over_cache(q, k_cache, v_cache, lengths, scale, causal, dtype=dtype)
    check_close(out, ref, low, "out")
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse), finite)
    assert torch.allclose(lse[finite].double(), lse_ref[finite], atol=1e-3, rtol=1e-3)


def paged(cache, page_size, seed=0, spare_pages=3):
    """The cache (batch, seqlen, heads, d) as pages (num_pages, page_size, heads, d) in a random
    order, with spare pages of noise, and its page table int32 (batch, max_pages)."""
    batch, seqlen = cache.shape[:2]
    max_pages = -(-seqlen // page_size)
    num_pages = batch * max_pages + spare_pages
    order = torch.randperm(num_pages, generator=torch.Generator().manual_seed(seed))[:batch * max_pages]
    padded = torch.randn(batch, max_pages * page_size, *cache.shape[2:], dtype=cache.dtype, device=cache.device)
    padded[:, :seqlen] = cache
    pages = torch.randn(num_pages, page_size, *cache.shape[2:], dtype=cache.dtype, device=cache.device)
    pages[order.to(cache.device)] = padded.view(batch * max_pages, page_size, *cache.shape[2:])
    return pages, order.view(batch, max_pages).to(torch.int32).to(cache.device)


@pytest.mark.parametrize("page_size", [1, 3, 8, 16, 64, 256, 1000])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_paged_cache(page_size, head_dim, causal):
    """Random page tables, lengths 0 to full and around tile edges, GQA, split and not."""
    dtype = torch.bfloat16  # (the loads see bytes: float16 takes the same path)
    skip_unless_compiled(head_dim, dtype)
    batch, sq, s_cache, hq, hkv = 4, 1 if page_size != 16 else 5, 1100, 16, 2
    torch.manual_seed(page_size + head_dim)
    q = torch.randn(batch, sq, hq, head_dim, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    k_pages, table = paged(k_cache, page_size, seed=page_size)
    v_pages, _ = paged(v_cache, page_size, seed=page_size)
    lengths = [max(n, sq) if causal else n for n in (s_cache, 0, 129, 1000)]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    scale = head_dim ** -0.5
    ref, lse_ref = reference_over_cache(q, k_cache, v_cache, lengths, scale, causal)
    low, _ = reference_over_cache(q, k_cache, v_cache, lengths, scale, causal, dtype=dtype)
    for num_splits in (0, 1, 3):
        out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=cache_seqlens, page_table=table,
                                           causal=causal, num_splits=num_splits, return_softmax_lse=True)
        check_close(out, ref, low, f"out, num_splits {num_splits}")
        finite = torch.isfinite(lse_ref)
        assert torch.equal(torch.isfinite(lse), finite)
        assert torch.allclose(lse[finite].double(), lse_ref[finite], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("page_size", [1, 16, 256])
@pytest.mark.parametrize("layout", ["kv_in_one_buffer", "v_rows_padded"])
def test_paged_cache_views(page_size, layout):
    """Pages as views: vLLM's (num_pages, 2, page_size, heads, d) buffer (V at K's strides, its
    own start), and V rows padded (strides that are not K's)."""
    skip_unless_compiled(128, torch.bfloat16)
    dtype, batch, s_cache, hq, hkv, d = torch.bfloat16, 3, 700, 8, 2, 128
    torch.manual_seed(page_size)
    q = torch.randn(batch, 2, hq, d, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    k_pages, table = paged(k_cache, page_size, seed=1)
    v_pages, _ = paged(v_cache, page_size, seed=1)
    if layout == "kv_in_one_buffer":
        buffer = torch.stack([k_pages, v_pages], dim=1)
        k_pages, v_pages = buffer[:, 0], buffer[:, 1]
    else:
        padded = torch.randn(*v_pages.shape[:-1], d + 64, device="cuda", dtype=dtype)
        padded[..., :d] = v_pages
        v_pages = padded[..., :d]
    lengths = [s_cache, 333, 2]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    out = flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=cache_seqlens, page_table=table, causal=True)
    check_over_cache(out, q, k_cache, v_cache, lengths, d ** -0.5, True)


def test_append_into_pages():
    """New tokens land in the pages the table names, at cache_seqlens, across a page edge."""
    skip_unless_compiled(128, torch.bfloat16)
    dtype, batch, s_cache, hq, hkv, d, page_size = torch.bfloat16, 3, 256, 8, 2, 128, 16
    torch.manual_seed(9)
    q = torch.randn(batch, 3, hq, d, device="cuda", dtype=dtype)
    k_new = torch.randn(batch, 3, hkv, d, device="cuda", dtype=dtype)
    v_new = torch.randn(batch, 3, hkv, d, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    k_pages, table = paged(k_cache, page_size)
    v_pages, _ = paged(v_cache, page_size)
    lengths = [0, 15, 200]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    out = flash_attn_with_kvcache(q, k_pages, v_pages, k=k_new, v=v_new, cache_seqlens=cache_seqlens,
                                  page_table=table, causal=True)
    for b, n in enumerate(lengths):
        k_cache[b, n:n + 3] = k_new[b]
        v_cache[b, n:n + 3] = v_new[b]
        for t in range(n + 3):
            page, row = table[b, t // page_size], t % page_size
            assert torch.equal(k_pages[page, row], k_cache[b, t]) and torch.equal(v_pages[page, row], v_cache[b, t])
    check_over_cache(out, q, k_cache, v_cache, [n + 3 for n in lengths], d ** -0.5, True)


@pytest.mark.parametrize("page_size", [16, 256])
def test_chunked_prefill_over_pages(page_size):
    """flash_attn_varlen_func with a block table: packed query chunks over paged keys."""
    skip_unless_compiled(128, torch.bfloat16)
    dtype, hq, hkv, d = torch.bfloat16, 8, 2, 128
    torch.manual_seed(page_size)
    chunks, keys = [300, 1, 0, 77], [1000, 1, 40, 600]
    k_cache = torch.randn(len(keys), max(keys), hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn(len(keys), max(keys), hkv, d, device="cuda", dtype=dtype)
    k_pages, table = paged(k_cache, page_size)
    v_pages, _ = paged(v_cache, page_size)
    q = torch.randn(sum(chunks), hq, d, device="cuda", dtype=dtype)
    cu_q = torch.tensor([0] + list(torch.tensor(chunks).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(keys).cumsum(0)), dtype=torch.int32, device="cuda")
    out = flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k, max(chunks), max(keys), causal=True,
                                 block_table=table)
    for b, (n_q, n_k) in enumerate(zip(chunks, keys)):
        if n_q == 0:
            continue
        rows = slice(int(cu_q[b]), int(cu_q[b + 1]))
        ref, _ = attention_reference(q[None, rows], k_cache[b:b + 1, :n_k], v_cache[b:b + 1, :n_k], d ** -0.5, True)
        low, _ = attention_reference(q[None, rows], k_cache[b:b + 1, :n_k], v_cache[b:b + 1, :n_k], d ** -0.5, True,
                                     dtype=dtype)
        check_close(out[None, rows], ref, low, f"sequence {b}")


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_new", [1, 3])
def test_append_with_rotary_in_place(interleaved, causal, seqlen_new):
    head_dim, rotary_dim = 128, 64
    skip_unless_compiled(head_dim, torch.bfloat16)
    batch, s_cache, hq, hkv = 3, 600, 16, 4
    torch.manual_seed(7 + seqlen_new)
    dtype = torch.bfloat16
    q = torch.randn(batch, seqlen_new, hq, head_dim, device="cuda", dtype=dtype)
    k_new = torch.randn(batch, seqlen_new, hkv, head_dim, device="cuda", dtype=dtype)
    v_new = torch.randn(batch, seqlen_new, hkv, head_dim, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    angles = torch.rand(s_cache, rotary_dim // 2, device="cuda") * 6.3
    cos, sin = angles.cos(), angles.sin()
    lengths = [0, 300, 590]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    k_expected, v_expected = k_cache.clone(), v_cache.clone()
    steps = torch.arange(seqlen_new, device="cuda")
    positions = cache_seqlens.long()[:, None] + steps
    k_rot = apply_rotary(k_new, cos, sin, positions, interleaved)
    q_rot = apply_rotary(q, cos, sin, positions if causal else cache_seqlens.long()[:, None] + 0 * steps, interleaved)
    for b, n in enumerate(lengths):
        k_expected[b, n:n + seqlen_new] = k_rot[b]
        v_expected[b, n:n + seqlen_new] = v_new[b]

    out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, rotary_cos=cos, rotary_sin=sin,
                                  cache_seqlens=cache_seqlens, causal=causal, rotary_interleaved=interleaved)
    assert torch.equal(k_cache, k_expected) and torch.equal(v_cache, v_expected), "cache not updated in place"
    check_over_cache(out, q_rot, k_expected, v_expected, [n + seqlen_new for n in lengths], head_dim ** -0.5, causal)


@pytest.mark.parametrize("num_splits", [0, 1])
def test_cache_batch_idx_picks_the_rows_and_appends_there(num_splits):
    """Sequence b reads and appends at cache row cache_batch_idx[b] of a cache with more rows."""
    skip_unless_compiled(128, torch.bfloat16)
    dtype, d, hq, hkv, s_cache = torch.bfloat16, 128, 8, 2, 1000
    torch.manual_seed(11)
    q = torch.randn(3, 1, hq, d, device="cuda", dtype=dtype)
    k_new = torch.randn(3, 1, hkv, d, device="cuda", dtype=dtype)
    v_new = torch.randn(3, 1, hkv, d, device="cuda", dtype=dtype)
    k_cache = torch.randn(5, s_cache, hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn(5, s_cache, hkv, d, device="cuda", dtype=dtype)
    rows = [4, 0, 2]
    cache_batch_idx = torch.tensor(rows, dtype=torch.int32, device="cuda")
    lengths = [999, 0, 300]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    k_expected, v_expected = k_cache.clone(), v_cache.clone()
    for b, (row, n) in enumerate(zip(rows, lengths)):
        k_expected[row, n] = k_new[b, 0]
        v_expected[row, n] = v_new[b, 0]
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=cache_seqlens,
                                       cache_batch_idx=cache_batch_idx, causal=True, num_splits=num_splits,
                                       return_softmax_lse=True)
    assert torch.equal(k_cache, k_expected) and torch.equal(v_cache, v_expected), "appended at the wrong rows"
    used = [n + 1 for n in lengths]
    ref, lse_ref = reference_over_cache(q, k_expected[rows], v_expected[rows], used, d ** -0.5, True)
    low, _ = reference_over_cache(q, k_expected[rows], v_expected[rows], used, d ** -0.5, True, dtype=dtype)
    check_close(out, ref, low, "out")
    assert torch.allclose(lse.double(), lse_ref, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("layout", ["contiguous", "cache_batch_idx", "paged16", "paged256"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_cache_leftpad(layout, causal, head_dim):
    """Left-padded caches: sequence b attends to cache rows [cache_leftpad[b], cache_seqlens[b]
    + seqlen_new); the new tokens land at cache_seqlens (rotated at those slots), as in
    FlashAttention. Packed GQA, split and unsplit, windows, pads of 0, inside and past a
    tile, and equal to the filled length (no key but the new ones)."""
    dtype, batch, s_cache, hq, hkv, seqlen_new, rotary_dim = torch.bfloat16, 4, 1000, 8, 2, 2, 32
    skip_unless_compiled(head_dim, dtype)
    torch.manual_seed(head_dim + causal)
    q = torch.randn(batch, seqlen_new, hq, head_dim, device="cuda", dtype=dtype)
    k_new = torch.randn(batch, seqlen_new, hkv, head_dim, device="cuda", dtype=dtype)
    v_new = torch.randn(batch, seqlen_new, hkv, head_dim, device="cuda", dtype=dtype)
    rows = [3, 0, 5, 1] if layout == "cache_batch_idx" else list(range(batch))
    k_cache = torch.randn(max(rows) + 1, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    v_cache = torch.randn(max(rows) + 1, s_cache, hkv, head_dim, device="cuda", dtype=dtype)
    angles = torch.rand(s_cache, rotary_dim // 2, device="cuda") * 6.3
    lengths, pads = [900, 300, 130, 7], [0, 129, 3, 7]
    cache_seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    cache_leftpad = torch.tensor(pads, dtype=torch.int32, device="cuda")
    positions = cache_seqlens.long()[:, None] + torch.arange(seqlen_new, device="cuda")
    k_expected, v_expected = k_cache.clone(), v_cache.clone()
    k_rot = apply_rotary(k_new, angles.cos(), angles.sin(), positions, True)
    q_rot = apply_rotary(q, angles.cos(), angles.sin(), positions, True)  # per token: a window is set
    for b, (row, n) in enumerate(zip(rows, lengths)):
        k_expected[row, n:n + seqlen_new] = k_rot[b]
        v_expected[row, n:n + seqlen_new] = v_new[b]
    kwargs = {}
    if layout.startswith("paged"):
        page_size = int(layout[5:])
        k_cache, kwargs["page_table"] = paged(k_cache, page_size)
        v_cache, _ = paged(v_cache, page_size)
    elif layout == "cache_batch_idx":
        kwargs["cache_batch_idx"] = torch.tensor(rows, dtype=torch.int32, device="cuda")
    window = (200, -1)
    for num_splits in (0, 1):
        k_step, v_step = k_cache.clone(), v_cache.clone()
        out, lse = flash_attn_with_kvcache(q, k_step, v_step, k=k_new, v=v_new, rotary_cos=angles.cos(),
                                           rotary_sin=angles.sin(), cache_seqlens=cache_seqlens,
                                           cache_leftpad=cache_leftpad, causal=causal, window_size=window,
                                           num_splits=num_splits, return_softmax_lse=True, **kwargs)
        if not layout.startswith("paged"):
            assert torch.equal(k_step, k_expected) and torch.equal(v_step, v_expected), "appended at the wrong slots"
        for b, (row, n, pad) in enumerate(zip(rows, lengths, pads)):
            keys = slice(pad, n + seqlen_new)
            args = (q_rot[b:b + 1], k_expected[row:row + 1, keys], v_expected[row:row + 1, keys], head_dim ** -0.5,
                    causal)
            ref, lse_ref = attention_reference(*args, window=window)
            low, _ = attention_reference(*args, window=window, dtype=dtype)
            check_close(out[b:b + 1], ref, low, f"sequence {b}, num_splits {num_splits}")
            assert torch.allclose(lse[b:b + 1].double(), lse_ref, atol=1e-3, rtol=1e-3)


def test_rotary_matches_the_pairs_definition():
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    angles = torch.rand(10, 2, dtype=torch.float64)
    positions = torch.tensor([[0, 4, 9], [1, 1, 2]])
    for interleaved in (True, False):
        y = apply_rotary(x, angles.cos(), angles.sin(), positions, interleaved)
        for b in range(2):
            for s in range(3):
                for i in range(2):
                    a = angles[positions[b, s], i]
                    j, k = (2 * i, 2 * i + 1) if interleaved else (i, i + 2)
                    x1, x2 = x[b, s, :, j], x[b, s, :, k]
                    assert torch.allclose(y[b, s, :, j], x1 * a.cos() - x2 * a.sin())
                    assert torch.allclose(y[b, s, :, k], x1 * a.sin() + x2 * a.cos())
        assert torch.equal(y[..., 4:], x[..., 4:])


@pytest.mark.parametrize("head_dim", [96, (192, 128)])
def test_cache_of_an_unsupported_head_dim_says_so(head_dim):
    qk, v_dim = head_dim if isinstance(head_dim, tuple) else (head_dim, head_dim)
    skip_unless_compiled(head_dim, torch.bfloat16)
    q = torch.randn(2, 1, 8, qk, device="cuda", dtype=torch.bfloat16)
    k_pages = torch.randn(4, 16, 2, qk, device="cuda", dtype=torch.bfloat16)
    v_pages = torch.randn(4, 16, 2, v_dim, device="cuda", dtype=torch.bfloat16)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match=f"page_table is not supported with head_dim = {qk}"):
        flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=20, page_table=table)
    pads = torch.tensor([0, 3], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match=f"leftpad_k is not supported with head_dim = {qk}"):
        flash_attn_with_kvcache(q, k_pages[:2], v_pages[:2], cache_seqlens=10, cache_leftpad=pads)


def decode_step_tensors(batch, s_cache, hq, hkv, d, page_size):
    """q, k_new, v_new (one token) and the caches of a bf16 decode step; paged with a random
    table of page_size rows (0: contiguous, table None)."""
    dtype = torch.bfloat16
    q = torch.randn(batch, 1, hq, d, device="cuda", dtype=dtype)
    k_new = torch.randn(batch, 1, hkv, d, device="cuda", dtype=dtype)
    v_new = torch.randn(batch, 1, hkv, d, device="cuda", dtype=dtype)
    k_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn(batch, s_cache, hkv, d, device="cuda", dtype=dtype)
    table = None
    if page_size:
        k_cache, table = paged(k_cache, page_size)
        v_cache, _ = paged(v_cache, page_size)
    return q, k_new, v_new, k_cache, v_cache, table


def capture(step):
    """A CUDA graph of step() (warmed up on a side stream first) and its output tensor."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph, out


@pytest.mark.parametrize("paged_cache", [False, True])
def test_decode_step_in_a_cuda_graph(paged_cache):
    """A decode step with changing cache_seqlens replays from one capture."""
    skip_unless_compiled(128, torch.bfloat16)
    batch = 8
    q, k_new, v_new, k_cache, v_cache, table = decode_step_tensors(batch, 2048, 32, 8, 128, 64 if paged_cache else 0)
    cache_seqlens = torch.full((batch,), 100, dtype=torch.int32, device="cuda")
    graph, out = capture(lambda: flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                                         cache_seqlens=cache_seqlens, page_table=table, causal=True))
    for n in (100, 1500, 7):
        cache_seqlens.fill_(n)
        graph.replay()
        torch.cuda.synchronize()
        expected = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=n + 1, page_table=table, causal=True)
        assert torch.equal(out, expected), f"replay with cache_seqlens {n}"


@pytest.mark.parametrize("paged_cache", [False, True])
def test_append_with_rotary_compiles_and_replays(paged_cache):
    """A decode step that appends with rotary (one kernel, mutating the caches) gives the
    eager result under torch.compile(fullgraph=True) and from a CUDA graph."""
    skip_unless_compiled(128, torch.bfloat16)
    torch.manual_seed(11)
    d = 128
    q, k_new, v_new, k_cache, v_cache, table = decode_step_tensors(4, 512, 16, 4, d, 16 if paged_cache else 0)
    angles = torch.rand(512, d // 2, device="cuda") * 6.3
    cos, sin = angles.cos(), angles.sin()
    cache_seqlens = torch.tensor([0, 100, 300, 511], dtype=torch.int32, device="cuda")

    def step(k_cache, v_cache):
        return flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, rotary_cos=cos, rotary_sin=sin,
                                       cache_seqlens=cache_seqlens, page_table=table, causal=True,
                                       rotary_interleaved=False)

    k_eager, v_eager = k_cache.clone(), v_cache.clone()
    expected = step(k_eager, v_eager)
    k_compiled, v_compiled = k_cache.clone(), v_cache.clone()
    got = torch.compile(step, fullgraph=True)(k_compiled, v_compiled)
    assert torch.equal(got, expected) and torch.equal(k_compiled, k_eager) and torch.equal(v_compiled, v_eager)
    k_graph, v_graph = k_cache.clone(), v_cache.clone()
    graph, out = capture(lambda: step(k_graph, v_graph))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, expected) and torch.equal(k_graph, k_eager) and torch.equal(v_graph, v_eager)


def test_errors_name_the_argument():
    q = torch.randn(2, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
    cache = torch.randn(2, 64, 2, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="page_table"):
        flash_attn_with_kvcache(q, cache, cache, page_table=torch.zeros(2, 4, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="shape.seqlen_k|max_pages"):  # 3 pages of 64 rows, seqlen_k past them
        flash_attn_with_kvcache(q, cache, cache, page_table=torch.zeros(2, 0, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="cache_batch_idx is not supported with page_table"):
        flash_attn_with_kvcache(q, cache, cache, page_table=torch.zeros(2, 4, dtype=torch.int32, device="cuda"),
                                cache_batch_idx=torch.zeros(2, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="cache_leftpad is torch.int64 of shape \\(2,\\); expected int32 \\(2,\\)"):
        flash_attn_with_kvcache(q, cache, cache, cache_leftpad=torch.zeros(2, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="cache_leftpad is torch.int32 of shape \\(3,\\)"):
        flash_attn_with_kvcache(q, cache, cache, cache_leftpad=torch.zeros(3, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="cache_batch_idx"):
        flash_attn_with_kvcache(q, cache, cache, cache_batch_idx=torch.zeros(2, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="cache_seqlens"):
        flash_attn_with_kvcache(q, cache, cache, cache_seqlens=torch.zeros(3, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="k and v"):
        flash_attn_with_kvcache(q, cache, cache, k=cache[:, :1], cache_seqlens=1)
    with pytest.raises(TypeError, match="rotary_cos, rotary_sin have dtypes torch.float64"):
        table = torch.ones(64, 32, dtype=torch.float64, device="cuda")
        flash_attn_with_kvcache(q, cache, cache, cache_seqlens=1, rotary_cos=table, rotary_sin=table)
    with pytest.raises(TypeError, match="k has dtype torch.float16"):
        flash_attn_with_kvcache(q, cache, cache, k=cache[:, :1].half(), v=cache[:, :1].half(), cache_seqlens=1)
    with pytest.raises(ValueError, match="num_splits = 200"):
        flash_attn_with_kvcache(q, cache, cache, num_splits=200)
