"""Bad input raises a Python exception that names the problem; these need no GPU."""
import pytest
import torch

from warpflash import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache


def tensors(shape_q=(2, 64, 8, 128), shape_kv=(2, 64, 2, 128), dtype=torch.bfloat16, device="cpu"):
    return (torch.randn(shape_q, dtype=dtype, device=device), torch.randn(shape_kv, dtype=dtype, device=device),
            torch.randn(shape_kv, dtype=dtype, device=device))


def test_cpu_tensors_are_rejected():
    with pytest.raises(ValueError, match="q is on cpu"):
        flash_attn_func(*tensors())


def test_float32_is_a_type_error():
    with pytest.raises(TypeError, match="float32"):
        flash_attn_func(*tensors(dtype=torch.float32))


def test_mixed_dtypes():
    q, k, v = tensors()
    with pytest.raises(TypeError, match="share a dtype"):
        flash_attn_func(q, k.half(), v)


def test_not_a_tensor():
    q, k, v = tensors()
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        flash_attn_func(q, [1, 2], v)


def test_wrong_rank():
    q, k, v = tensors()
    with pytest.raises(ValueError, match="4-D"):
        flash_attn_func(q[0], k, v)


def test_non_contiguous_head_dim():
    q, k, v = tensors()
    with pytest.raises(ValueError, match=r"stride\(-1\)"):
        flash_attn_func(q.transpose(-1, -2), k, v)


def test_k_v_shape_mismatch():
    q, k, v = tensors()
    with pytest.raises(ValueError, match="same shape"):
        flash_attn_func(q, k, v[:, :32])


def test_heads_not_a_multiple():
    q, k, v = tensors(shape_q=(2, 64, 6, 128), shape_kv=(2, 64, 4, 128))
    with pytest.raises(ValueError, match="multiple"):
        flash_attn_func(q, k, v)


def test_batch_or_head_dim_mismatch():
    q, k, v = tensors(shape_q=(2, 64, 8, 64))
    with pytest.raises(ValueError, match="batch and head_dim"):
        flash_attn_func(q, k, v)


def test_bad_window_size():
    with pytest.raises(ValueError, match=r"window_size = \(-3, 0\)"):
        flash_attn_func(*tensors(device="cpu"), window_size=(-3, 0))
    with pytest.raises(TypeError, match="window_size must be a pair"):
        flash_attn_func(*tensors(device="cpu"), window_size=5)


def test_bad_softcap_and_chunk():
    with pytest.raises(ValueError, match="softcap = -1.0"):
        flash_attn_func(*tensors(), softcap=-1.0)
    with pytest.raises(ValueError, match="attention_chunk = -4"):
        flash_attn_func(*tensors(), attention_chunk=-4)


def test_varlen_cu_seqlens_must_be_tensors():
    q = torch.randn(10, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="cu_seqlens_q must be a torch.Tensor"):
        flash_attn_varlen_func(q, q, q, [0, 10], [0, 10], 10, 10)


def test_kvcache_arguments_name_the_problem():
    q = torch.randn(2, 1, 8, 128, dtype=torch.bfloat16)
    cache = torch.randn(2, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="page_table is torch.int64 of shape \\(2, 4\\); expected int32"):
        flash_attn_with_kvcache(q, cache, cache, page_table=torch.zeros(2, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="cache_batch_idx is not supported with page_table"):
        flash_attn_with_kvcache(q, cache, cache, page_table=torch.zeros(2, 4, dtype=torch.int32),
                                cache_batch_idx=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="cache_leftpad is torch.int64 of shape \\(2,\\); expected int32 \\(2,\\)"):
        flash_attn_with_kvcache(q, cache, cache, cache_leftpad=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="cache_leftpad is torch.int32 of shape \\(3,\\)"):
        flash_attn_with_kvcache(q, cache, cache, cache_leftpad=torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="expected an int or int32 \\(2,\\)"):
        flash_attn_with_kvcache(q, cache, cache, cache_seqlens=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="need cache_seqlens"):
        flash_attn_with_kvcache(q, cache, cache, k=cache[:, :1], v=cache[:, :1])
    with pytest.raises(ValueError, match="rotary_cos and rotary_sin"):
        flash_attn_with_kvcache(q, cache, cache, rotary_cos=torch.ones(64, 32))
    with pytest.raises(ValueError, match="batch 3"):
        flash_attn_with_kvcache(q, cache[:1].expand(3, -1, -1, -1), cache)
    with pytest.raises(ValueError, match="rotary_dim <= head_dim"):
        flash_attn_with_kvcache(q, cache, cache, cache_seqlens=1, rotary_cos=torch.ones(64, 80),
                                rotary_sin=torch.ones(64, 80))
