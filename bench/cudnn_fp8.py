"""cuDNN FP8 (E4M3) scaled-dot-product-attention forward, as a baseline for the FP8 benchmarks.

Measures one execution of a prebuilt cuDNN frontend graph holding one ``sdpa_fp8`` node (inference
mode, no softmax stats; descales/scales 1.0). Graph, heuristics, plan and workspace are built in
``make_cudnn_fp8_sdpa``; the callable only sets the handle's stream and calls ``graph.execute``.

Limits: needs nvidia-cudnn-frontend (plus cuda-python's ``cuda.bindings``, which it imports to lower
to the backend) over cuDNN 9.x on Hopper or newer; on Hopper cuDNN writes O as FP8 E4M3 only.
head_dim a multiple of 16 (<= 256 on Hopper), dense inputs only (no varlen/paging/window). cuDNN
also writes Amax_O (one float), which FlashAttention's FP8 path does not compute. ``execute`` builds
its variant pack in Python each call (tens of us of host time, visible only on tiny problems).
Causal is FlashAttention's: bottom-right aligned when seqlen_q != seqlen_k (top-left if equal).
"""
import math

import torch
import cudnn

_E4M3, _FP32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT


def _declare(graph, name, t, dtype=_E4M3):  # t: a (b, h, s, d) view; strides give the memory layout
    return graph.tensor(name=name, dim=list(t.shape), stride=list(t.stride()), data_type=dtype)


def make_cudnn_fp8_sdpa(q, k, v, causal, softmax_scale=None, *, s_scale=1.0):
    """q, k, v: CUDA float8_e4m3fn tensors, (batch, seqlen, heads, head_dim); heads_q may be a
    multiple of heads_kv (GQA/MQA; NotImplementedError if cuDNN declines that).

    Returns a zero-argument callable running cuDNN's FP8 SDPA forward on these tensors on the
    current stream. It returns O as float8_e4m3fn shaped (batch, seqlen_q, heads_q, head_dim),
    FlashAttention's layout (one buffer, rewritten by every call). Q/K/V descales and the O scale
    are 1.0; ``s_scale`` multiplies the softmax probabilities before their FP8 cast (1.0 by
    default, descale_s = 1 / s_scale; NVIDIA's tests use 448).
    """
    for t in (q, k, v):
        if t.dtype != torch.float8_e4m3fn or not t.is_cuda or t.dim() != 4 or t.stride(-1) != 1:
            raise ValueError("q, k, v must be CUDA float8_e4m3fn (b, s, h, d) tensors, last stride 1")
    (b, sq, hq, d), (sk, hk) = q.shape, k.shape[1:3]
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d or hq % hk:
        raise ValueError(f"incompatible shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if d % 16:
        raise NotImplementedError("cuDNN FP8 SDPA needs head_dim to be a multiple of 16")
    dev = q.device
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream(dev).cuda_stream)
    graph = cudnn.pygraph(io_data_type=_E4M3, intermediate_data_type=_FP32, compute_data_type=_FP32, handle=handle)
    qv, kv, vv = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, s, d) views, no copies
    tq, tk, tv = (_declare(graph, n, t) for n, t in (("q", qv), ("k", kv), ("v", vv)))
    pack = {tq: qv, tk: kv, tv: vv}
    scalars = {}
    for name, value in (("descale_q", 1.0), ("descale_k", 1.0), ("descale_v", 1.0),
                        ("descale_s", 1.0 / s_scale), ("scale_s", s_scale), ("scale_o", 1.0)):
        buf = torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=dev)
        scalars[name] = _declare(graph, name, buf, _FP32)
        pack[scalars[name]] = buf
    # causal = right_bound 0 from the aligned diagonal (use_causal_mask is the deprecated spelling)
    align = cudnn.diagonal_alignment.TOP_LEFT if sq == sk else cudnn.diagonal_alignment.BOTTOM_RIGHT
    mask = dict(diagonal_alignment=align, right_bound=0) if causal else {}
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    o_t, _stats, _amax_s, amax_o_t = graph.sdpa_fp8(
        q=tq, k=tk, v=tv, **scalars, attn_scale=scale, generate_stats=False, name="sdpa_fp8", **mask)
    out = torch.empty(b, sq, hq, d, dtype=torch.float8_e4m3fn, device=dev)
    ov = out.transpose(1, 2)
    o_t.set_output(True).set_dim(list(ov.shape)).set_stride(list(ov.stride())).set_data_type(_E4M3)
    amax_o = torch.zeros(1, 1, 1, 1, dtype=torch.float32, device=dev)
    amax_o_t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(_FP32)
    pack[o_t], pack[amax_o_t] = ov, amax_o  # Amax_S stays virtual: a deprecated output
    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except cudnn.cudnnGraphNotSupportedError as err:
        if hq != hk:
            raise NotImplementedError(f"cuDNN declined FP8 SDPA with heads_q={hq}, heads_kv={hk}: {err}") from err
        raise
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=dev)

    def run():
        cudnn.set_stream(handle, torch.cuda.current_stream(dev).cuda_stream)  # cached; no-op if unchanged
        graph.execute(pack, workspace, handle=handle)
        return out

    run.graph, run.handle, run.amax_o = graph, handle, amax_o  # kept alive with the callable
    return run


def _reference(q, k, v, causal):
    """float32 attention of the dequantized (descale 1.0) inputs, in (b, s, h, d)."""
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    kf, vf = (t.repeat_interleave(qf.shape[1] // t.shape[1], 1) for t in (kf, vf))  # GQA: kv head = q head // group
    s = qf @ kf.transpose(-1, -2) / math.sqrt(qf.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(sk - sq), float("-inf"))
    return (s.softmax(-1) @ vf).transpose(1, 2)


if __name__ == "__main__":
    torch.manual_seed(0)
    print("cuDNN", cudnn.backend_version_string(), "| frontend", cudnn.__version__)
    for heads_kv in (8, 2):
        for causal in (False, True):
            q, k, v = (torch.randn(2, 256, h, 128, device="cuda").to(torch.float8_e4m3fn)
                       for h in (8, heads_kv, heads_kv))
            try:
                fn = make_cudnn_fp8_sdpa(q, k, v, causal)
            except NotImplementedError as exc:
                print(f"heads_kv={heads_kv} causal={causal}: not supported ({exc})")
                continue
            out = fn().float()
            torch.cuda.synchronize()
            ref = _reference(q, k, v, causal)
            err, top = (out - ref).abs().max().item(), ref.abs().max().item()
            print(f"heads_kv={heads_kv} causal={causal}: max|err|={err:.4f} max|ref|={top:.4f} "
                  f"err/max|ref|={err / top:.2%} engine={fn.graph.selected_engine or 'cuDNN backend'}")
