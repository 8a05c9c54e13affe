"""Helpers shared by the Python benchmarks (sdpa_baseline.py, benchmark.py): the paper's
workload, the FLOP formula, command-line lists, CUDA-event timing and table cells.

Nothing here imports torch at module level, so the scripts' --help works without a GPU;
the functions that need torch take the module as an argument.
"""
import argparse
import csv
import functools
import math
import warnings

# The FlashAttention-3 paper's workload: batch * seqlen = 16k tokens, heads * head_dim = 2048.
TOKENS = 16384
HIDDEN = 2048
DTYPE_NAMES = ("bf16", "fp16")
# PyTorch SDPA backends by our short names (attribute names of torch.nn.attention.SDPBackend).
SDPA_BACKENDS = {"cudnn": "CUDNN_ATTENTION", "fa2": "FLASH_ATTENTION"}


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def int_list(text):
    return [positive_int(x) for x in text.split(",")]


def name_list(choices, what="value"):
    """An argparse type: a comma-separated list of names, each one of `choices`."""
    def parse(text):
        names = text.split(",")
        for name in names:
            if name not in choices:
                raise argparse.ArgumentTypeError(f"{what} '{name}' is not one of {', '.join(choices)}")
        return names
    return parse


def torch_dtype(torch, name):
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def causal_values(option):
    return {"both": [False, True], "0": [False], "1": [True]}[option]


def batch_for(seqlen):
    return max(1, TOKENS // seqlen)


def attention_flops(batch, heads_q, seqlen_q, seqlen_k, head_dim, causal):
    """4*b*h*sq*sk*d (two GEMMs), halved when causal (exact for seqlen_q == seqlen_k)."""
    return 4.0 * batch * heads_q * seqlen_q * seqlen_k * head_dim / (2.0 if causal else 1.0)


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def time_ms(torch, fn, warmup, iters):
    """Median milliseconds of fn over `iters` launches, each between its own event pair.

    The host does not wait between launches, so it runs ahead of the GPU and its launch
    overhead stays out of the numbers (as in bench/bench_forward.cpp).
    """
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return median([start.elapsed_time(stop) for start, stop in events])


def sdpa_backend(impl):
    """The sdpa_kernel context that allows only SDPA's `impl` backend ("cudnn" or "fa2")."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[impl]))


def call_sdpa(impl, fn):
    """(fn(), None) under SDPA's `impl` backend, or (None, reason) when it refuses or fails.

    SDPA explains a refusal in warnings and then raises "No available kernel".
    """
    with warnings.catch_warnings(record=True) as caught, sdpa_backend(impl):
        warnings.simplefilter("always")
        try:
            return fn(), None
        except RuntimeError as error:
            reasons = [str(w.message) for w in caught] or [str(error)]
            return None, " ".join(" ".join(reasons).split())


def number_or_none(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def cell(value, width, decimals):
    return f"{value:{width}.{decimals}f}" if value is not None else f"{'n/a':>{width}}"


def ratio(a, b):
    return a / b if a is not None and b is not None else None


def collect_rows(rows, out, columns, to_csv):
    """Lists `rows` as they are measured, writing each to the open CSV file `out` (if any)
    at once, so what was measured survives a later crash; closes `out`."""
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore") if out else None
    if writer:
        writer.writeheader()
    collected = []
    for row in rows:
        collected.append(row)
        if writer:
            writer.writerow(to_csv(row))
            out.flush()
    if out:
        out.close()
    return collected


dtype_list = name_list(DTYPE_NAMES, "dtype")


@functools.lru_cache(maxsize=None)
def flash_attention_peers():
    """The FlashAttention peers that import: ({"fa3": fa3-fwd's interface module, "fa4":
    flash-attn-4's cute interface}, {name: why it is missing}). Tried once per process
    (benchmark.py asks for every configuration)."""
    found, missing = {}, {}
    try:
        import fa3_fwd._C  # noqa: F401  (registers its operators)
        import fa3_fwd_interface
        found["fa3"] = fa3_fwd_interface
    except Exception as error:  # noqa: BLE001
        missing["fa3"] = f"fa3-fwd not importable ({type(error).__name__}: {error})"
    try:
        from flash_attn.cute import interface as fa4
        found["fa4"] = fa4
    except Exception as error:  # noqa: BLE001
        missing["fa4"] = f"flash-attn-4 not importable ({type(error).__name__}: {error})"
    return found, missing
