"""The operator's shape function (what torch.compile traces with), checked on meta tensors:
no GPU needed."""
import pytest
import torch

import warpflash  # noqa: F401  (registers torch.ops.warpflash)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape_q,shape_kv", [((2, 100, 8, 128), (2, 300, 2, 128)), ((1, 1, 4, 64), (1, 7, 4, 64))])
def test_fake_forward_shapes(shape_q, shape_kv, dtype):
    q = torch.empty(shape_q, device="meta", dtype=dtype)
    k = torch.empty(shape_kv, device="meta", dtype=dtype)
    out, lse = torch.ops.warpflash.forward(q, k, k, None, None, None, None, 0, 0, 0.1, True, -1, -1, 0, 0.0, None)
    assert out.shape == q.shape and out.dtype == dtype and out.device.type == "meta"
    assert lse.shape == (shape_q[0], shape_q[2], shape_q[1]) and lse.dtype == torch.float32


def test_fake_forward_shapes_with_a_value_head_dim_of_its_own():
    q = torch.empty(2, 100, 8, 192, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 300, 2, 192, device="meta", dtype=torch.bfloat16)
    v = torch.empty(2, 300, 2, 128, device="meta", dtype=torch.bfloat16)
    out, lse = torch.ops.warpflash.forward(q, k, v, None, None, None, None, 0, 0, 0.1, True, -1, -1, 0, 0.0, None)
    assert out.shape == (2, 100, 8, 128) and lse.shape == (2, 8, 100)


def test_fake_varlen_shapes():
    q = torch.empty(300, 8, 128, device="meta", dtype=torch.bfloat16)
    k = torch.empty(500, 2, 128, device="meta", dtype=torch.bfloat16)
    cu = torch.empty(4, device="meta", dtype=torch.int32)
    out, lse = torch.ops.warpflash.forward(q, k, k, cu, cu, None, None, 200, 300, 0.1, False, 64, 0, 0, 0.0, None)
    assert out.shape == q.shape and lse.shape == (8, 300)


def test_fake_backward_shapes():
    q = torch.empty(2, 100, 8, 128, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 300, 2, 128, device="meta", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    lse = torch.empty(2, 8, 100, device="meta", dtype=torch.float32)
    d_q, d_k, d_v, d_sink = torch.ops.warpflash.backward(out, q, k, k, out, lse, None, None, None, None, 0, 0, 0.1,
                                                         True, -1, -1, 0, 0.0, None, False)
    assert d_q.shape == q.shape and d_k.shape == k.shape and d_v.shape == k.shape and d_q.dtype == q.dtype
    assert d_sink.shape == (0,)


def test_fake_forward_and_backward_trace():
    """What torch.compile sees of a training step: the forward operator's autograd formula
    calls the backward operator, traced on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 100, 8, 128, device="meta", dtype=torch.bfloat16, requires_grad=True)
        k = torch.empty(2, 300, 2, 128, device="meta", dtype=torch.bfloat16, requires_grad=True)
        v = torch.empty(2, 300, 2, 128, device="meta", dtype=torch.bfloat16, requires_grad=True)
        out, _ = torch.ops.warpflash.forward(q, k, v, None, None, None, None, 0, 0, 0.1, True, -1, -1, 0, 0.0, None)
        out.sum().backward()
        assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape
