#!/usr/bin/env python3
"""Side-by-side forward attention benchmark of the Python package, in one run on one GPU:
warpflash (warpflash.flash_attn_func), FlashAttention-3's forward (PyPI fa3-fwd) and
FlashAttention-4's SM90 forward (PyPI flash-attn-4, flash_attn.cute), each where installed
and named as skipped where not, PyTorch SDPA's cuDNN and flash (FA2) backends, and
FlexAttention (torch.compile'd flex_attention; a causal block mask when causal). The
features (varlen, windows, softcap, sinks) have their own benchmark: bench/features.py.

Workloads:
  paper  the FlashAttention-3 paper's grid: 16k tokens (batch = 16384 / seqlen), hidden 2048
         (heads = 2048 / head_dim); --dtypes, --head-dims, --seqlens and --causal select it.
  llama  Llama-3-8B prefill: 32 query heads, 8 KV heads (GQA), head_dim 128, causal, batch 4,
         seqlen 4096 and 8192; --dtypes selects it.
FLOPs = 4*batch*heads_q*seqlen_q*seqlen_k*head_dim, halved when causal. Inputs are random
normal in warpflash's (batch, seqlen, heads, head_dim) layout; SDPA and Flex get the
(batch, heads, seqlen, head_dim) transposed views of the same tensors. GQA goes through
enable_gqa=True; a backend that refuses it gets K/V repeated to heads_q outside the timing.

Before a config is timed, every implementation's output is compared with cuDNN's (or, where
cuDNN is n/a, with a float32 reference on a slice): the run exits non-zero at the end if any
disagrees (relative L2 >= --max-rel-l2) or warpflash fails to run. Timing as in
bench/sdpa_baseline.py and bench/bench_forward.cpp: warm-up launches, then one CUDA-event
pair per launch, median; the implementations take turns --repeats times per config (so a
drift of the GPU's clocks hits all alike) and each reports the median of its repeats. The
summary gives warpflash's ratio to every peer and to the faster of FA3 and FA4 ("wf/best").
FA4 compiles a kernel on its first call of a shape, before the timing. Flex is compiled
once per (workload, dtype, head dim, mask); with static shapes (unless --flex-dynamic) each
new seqlen recompiles. A compile that raises or
takes longer than --flex-compile-timeout gives up on Flex for that group (n/a, with why).

    python3 bench/benchmark.py --csv bench-results/python.csv --plot-dir bench-results/plots
"""
import argparse
import collections
import contextlib
import datetime
import logging
import os
import signal
import subprocess
import sys
import time

from bench_common import (HIDDEN, attention_flops, batch_for, call_sdpa, causal_values, cell, collect_rows,
                          dtype_list, flash_attention_peers, geomean, int_list, median, name_list,
                          positive_int, ratio, sdpa_backend, tflops, time_ms, torch_dtype)

IMPLS = ("warpflash", "fa3", "fa4", "cudnn", "fa2", "flex")
TITLES = {"warpflash": "warpflash", "fa3": "FA3", "fa4": "FA4", "cudnn": "cuDNN", "fa2": "FA2",
          "flex": "Flex"}
FLASH_PEERS = ("fa3", "fa4")  # "best": the faster of these
WORKLOADS = ("paper", "llama")
LLAMA = dict(workload="llama3-8b", head_dim=128, heads_q=32, heads_kv=8, causal=True, batch=4,
             seqlens=(4096, 8192))
CSV_COLUMNS = ("impl", "dtype", "head_dim", "causal", "seqlen", "batch", "heads_q", "heads_kv",
               "workload", "ms_median", "tflops")

Case = collections.namedtuple(
    "Case", "workload dtype head_dim causal seqlen batch heads_q heads_kv")


class Unavailable(Exception):
    """An implementation cannot run a case; the message says why."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--impls", type=name_list(IMPLS, "implementation"), default=list(IMPLS),
                   help="default " + ",".join(IMPLS))
    p.add_argument("--workloads", type=name_list(WORKLOADS, "workload"), default=list(WORKLOADS),
                   help="default " + ",".join(WORKLOADS))
    p.add_argument("--dtypes", type=dtype_list, default=["bf16", "fp16"], help="default bf16,fp16")
    p.add_argument("--head-dims", type=int_list, default=[64, 128, 256],
                   help="paper grid; default 64,128,256")
    p.add_argument("--seqlens", type=int_list, default=[512, 1024, 2048, 4096, 8192, 16384],
                   help="paper grid; default 512,1024,2048,4096,8192,16384")
    p.add_argument("--causal", choices=["both", "0", "1"], default="both",
                   help="paper grid; default both")
    p.add_argument("--iters", type=positive_int, default=100, help="timed launches per config")
    p.add_argument("--warmup", type=positive_int, default=10, help="untimed launches before them")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="turns of all implementations per config; each reports the median "
                        "(default 3)")
    p.add_argument("--csv", help="write results here (" + ",".join(CSV_COLUMNS) + ")")
    p.add_argument("--plot-dir", help="write forward_<dtype>.png of the paper grid here")
    p.add_argument("--title", default="", help="appended to the plot titles (GPU, date)")
    p.add_argument("--commit", default=None,
                   help="commit to report (default: git rev-parse HEAD; give it where the "
                        "checkout's .git is not the code's, e.g. a copied working tree)")
    p.add_argument("--max-rel-l2", type=float, default=1e-2,
                   help="largest relative L2 difference from the reference that passes")
    p.add_argument("--flex-compile-timeout", type=positive_int, default=60,
                   help="seconds for Flex's first call of a config (default 60)")
    p.add_argument("--flex-dynamic", action="store_true",
                   help="compile Flex with dynamic shapes (one compile per group) instead of "
                        "static shapes (one per seqlen, usually faster kernels)")
    return p.parse_args(argv)


def cases(args):
    if "paper" in args.workloads:
        for dtype in args.dtypes:
            for head_dim in args.head_dims:
                for causal in causal_values(args.causal):
                    for seqlen in args.seqlens:
                        heads = HIDDEN // head_dim
                        yield Case("paper", dtype, head_dim, causal, seqlen, batch_for(seqlen),
                                   heads, heads)
    if "llama" in args.workloads:
        for dtype in args.dtypes:
            for seqlen in LLAMA["seqlens"]:
                yield Case(LLAMA["workload"], dtype, LLAMA["head_dim"], LLAMA["causal"], seqlen,
                           LLAMA["batch"], LLAMA["heads_q"], LLAMA["heads_kv"])


def one_line(error, limit=300):
    text = " ".join(str(error).split()).split(" Set TORCHDYNAMO_VERBOSE")[0]  # dynamo's advice
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit] + "..."


@contextlib.contextmanager
def deadline(seconds):
    """Raises TimeoutError in the main thread once `seconds` have passed."""
    def expire(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Flex:
    """torch.compile'd flex_attention, one compiled function per group of configs."""

    def __init__(self, torch, timeout, dynamic):
        self.torch, self.timeout, self.dynamic = torch, timeout, dynamic
        self.group, self.compiled, self.given_up = None, None, {}
        limits = torch._dynamo.config
        limits.recompile_limit = max(limits.recompile_limit, 64)

    def prepare(self, case, q, k, v):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        torch = self.torch
        group = (case.workload, case.dtype, case.head_dim, case.causal)
        if group in self.given_up:
            raise Unavailable(f"gave up on this group: {self.given_up[group]}")
        if group != self.group:
            torch._dynamo.reset()  # drop the last group's graphs (and its recompile count)
            self.group, self.compiled = group, torch.compile(flex_attention, dynamic=self.dynamic)
        block_mask = None
        if case.causal:
            offset = k.shape[2] - q.shape[2]  # bottom-right aligned, like the others
            block_mask = create_block_mask(lambda b, h, qi, ki: qi + offset >= ki, None, None,
                                           q.shape[2], k.shape[2], device=q.device)
        compiled, gqa = self.compiled, case.heads_q != case.heads_kv
        fn = lambda: compiled(q, k, v, block_mask=block_mask, enable_gqa=gqa)  # noqa: E731
        start = time.perf_counter()
        inductor_log = logging.getLogger("torch._inductor")
        level = inductor_log.level
        inductor_log.setLevel(logging.CRITICAL)  # a stopped compile logs whole kernels
        try:
            with deadline(self.timeout):
                out = fn()
                torch.cuda.synchronize()
        except Exception as error:  # a failed or slow compile: n/a for the whole group
            self.given_up[group] = f"compile: {one_line(error)}"
            torch._dynamo.reset()
            self.group = None
            raise Unavailable(self.given_up[group]) from None
        finally:
            inductor_log.setLevel(level)
        return fn, out.transpose(1, 2), f"first call (compile) {time.perf_counter() - start:.1f} s"


def prepare_sdpa(torch, impl, case, q, k, v):
    """(fn, output, note) for SDPA's `impl` backend; fn runs under sdpa_backend(impl)."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    kwargs = dict(is_causal=case.causal)
    if case.heads_q != case.heads_kv:
        kwargs["enable_gqa"] = True
    out, reason = call_sdpa(impl, lambda: sdpa(q, k, v, **kwargs))
    note = ""
    if out is None and "enable_gqa" in kwargs:
        group = case.heads_q // case.heads_kv
        k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
        del kwargs["enable_gqa"]
        out, retry_reason = call_sdpa(impl, lambda: sdpa(q, k, v, **kwargs))
        reason = f"with enable_gqa: {reason}; with K/V repeated: {retry_reason}"
        note = "refuses enable_gqa; K/V repeated outside the timing"
    if out is None:
        raise Unavailable(reason)
    return (lambda: sdpa(q, k, v, **kwargs)), out.transpose(1, 2), note


def prepare(torch, impl, case, tensors, flex):
    """(fn, output in (batch, seqlen, heads, head_dim), note), or raises Unavailable."""
    q, k, v = tensors
    qt, kt, vt = (t.transpose(1, 2) for t in tensors)
    if impl == "warpflash":
        try:
            import warpflash
            fn = lambda: warpflash.flash_attn_func(q, k, v, causal=case.causal)  # noqa: E731
            return fn, fn(), ""
        except Exception as error:
            raise Unavailable(one_line(error)) from None
    if impl in FLASH_PEERS:  # FlashAttention-3 / -4, where installed
        found, missing = flash_attention_peers()
        if impl not in found:
            raise Unavailable(f"skipped: {missing[impl]}")
        fn = lambda: found[impl].flash_attn_func(q, k, v, causal=case.causal)  # noqa: E731
        out = fn()
        out = out[0] if isinstance(out, tuple) else out  # FA4 returns (out, lse)
        return fn, out, ""
    if impl == "flex":
        return flex.prepare(case, qt, kt, vt)
    return prepare_sdpa(torch, impl, case, qt, kt, vt)


def reference(torch, case, tensors):
    """(name, select, ref): cuDNN's output, or float32 attention on a slice (two (batch,
    head) pairs) where cuDNN is n/a; select(out) picks the slice of an output to compare."""
    q, k, v = tensors
    try:
        _, out, _ = prepare_sdpa(torch, "cudnn", case, *(t.transpose(1, 2) for t in tensors))
        return "cudnn", lambda o: o, out
    except Unavailable:
        pass
    pairs = sorted({(0, 0), (case.batch - 1, case.heads_q - 1)})
    group = case.heads_q // case.heads_kv
    rows, cols = torch.arange(q.shape[1], device=q.device), torch.arange(k.shape[1], device=q.device)
    masked = cols[None, :] > rows[:, None] + (k.shape[1] - q.shape[1])
    refs = []
    for b, h in pairs:
        scores = (q[b, :, h].float() @ k[b, :, h // group].float().T) / case.head_dim ** 0.5
        if case.causal:
            scores.masked_fill_(masked, float("-inf"))
        refs.append(torch.softmax(scores, dim=-1) @ v[b, :, h // group].float())
    return "fp32 slice", (lambda o: torch.stack([o[b, :, h] for b, h in pairs])), torch.stack(refs)


def compare(out, ref):
    """(max |out - ref|, ||out - ref|| / ||ref||) in float32; NaN propagates."""
    diff = out.float() - ref.float()
    return diff.abs().max().item(), (diff.norm() / ref.float().norm()).item()


def measure(torch, args, failures):
    """Yields one result row per (case, impl), printing each as it comes."""
    flex = Flex(torch, args.flex_compile_timeout, args.flex_dynamic) if "flex" in args.impls else None
    torch.manual_seed(0)
    for case in cases(args):
        dtype = torch_dtype(torch, case.dtype)
        tensors = tuple(torch.randn(case.batch, case.seqlen, heads, case.head_dim, device="cuda",
                                    dtype=dtype)
                        for heads in (case.heads_q, case.heads_kv, case.heads_kv))
        label = (f"{case.workload} {case.dtype} d={case.head_dim} causal={int(case.causal)} "
                 f"seqlen={case.seqlen} batch={case.batch} heads={case.heads_q}/{case.heads_kv}")
        ref_name, select, ref = reference(torch, case, tensors)
        flops = attention_flops(case.batch, case.heads_q, case.seqlen, case.seqlen, case.head_dim,
                                case.causal)
        prepared, notes = {}, {}
        for impl in args.impls:
            try:
                fn, out, note = prepare(torch, impl, case, tensors, flex)
                if impl != ref_name:
                    max_abs, rel_l2 = compare(select(out), ref)
                    if not rel_l2 < args.max_rel_l2:
                        raise Unavailable(f"DISAGREES with {ref_name}: rel L2 {rel_l2:.2e} "
                                          f"(max {args.max_rel_l2:.0e}), max abs diff {max_abs:.3e}")
                    note = f"vs {ref_name}: rel L2 {rel_l2:.1e}, max abs {max_abs:.1e}" + (
                        f"; {note}" if note else "")
                del out
                prepared[impl], notes[impl] = fn, note
            except Exception as error:  # Unavailable, or a failure of its first call
                notes[impl] = f"n/a: {error if isinstance(error, Unavailable) else one_line(error)}"
        # The implementations take turns, so that a change of the GPU's clocks or
        # temperature during a config falls on all of them.
        times = {impl: [] for impl in prepared}
        for _ in range(args.repeats):
            for impl, fn in list(prepared.items()):
                context = sdpa_backend(impl) if impl in ("cudnn", "fa2") else contextlib.nullcontext()
                try:
                    with context:
                        times[impl].append(time_ms(torch, fn, args.warmup, args.iters))
                except Exception as error:  # a failure while timing
                    notes[impl] = f"n/a: {one_line(error)}"
                    del prepared[impl], times[impl]
        for impl in args.impls:
            ms = median(times[impl]) if impl in times else None
            note = notes[impl]
            if ms is None and (impl == "warpflash" or "DISAGREES" in note):
                failures.append(f"{impl} {label}: {note}")
            tf = tflops(flops, ms) if ms is not None else None
            print(f"{TITLES[impl]:<9} {label:<62} {cell(ms, 9, 4)} ms {cell(tf, 7, 1)} TFLOP/s"
                  + (f"  ({note})" if note else ""), flush=True)
            yield dict(case._asdict(), impl=impl, causal=int(case.causal), ms_median=ms, tflops=tf)
        del tensors, ref


def summary(rows, impls):
    """Lines of a table: TFLOP/s per impl, ratios of warpflash to each peer and to the faster
    of FA3 and FA4 ("best"), and the geometric means of those ratios over the paper grid."""
    peers = [i for i in impls if i != "warpflash"] if "warpflash" in impls else []
    flash_peers = [p for p in peers if p in FLASH_PEERS]
    columns = peers + (["best"] if flash_peers else [])
    by_case = collections.OrderedDict()
    for row in rows:
        key = tuple(row[c] for c in ("workload", "dtype", "head_dim", "causal", "seqlen", "batch",
                                     "heads_q", "heads_kv"))
        by_case.setdefault(key, {})[row["impl"]] = row["tflops"]
    bar = " | " if peers else ""
    lines = [f"{'workload':<9} {'dtype':<5} {'hdim':>4} {'causal':>6} {'seqlen':>6} {'batch':>5} "
             f"{'hq/hkv':>6} | " + " ".join(f"{TITLES[i]:>9}" for i in impls) + bar
             + " ".join(f"{'wf/' + TITLES.get(c, c):>9}" for c in columns)]
    paper_ratios = {c: [] for c in columns}
    for key, tf in by_case.items():
        workload, dtype, head_dim, causal, seqlen, batch, hq, hkv = key
        best = max((tf[p] for p in flash_peers if tf.get(p) is not None), default=None)
        ratios = [ratio(tf.get("warpflash"), best if c == "best" else tf.get(c)) for c in columns]
        for c, r in zip(columns, ratios):
            if r is not None and workload == "paper":
                paper_ratios[c].append(r)
        lines.append(f"{workload:<9} {dtype:<5} {head_dim:>4} {causal:>6} {seqlen:>6} {batch:>5} "
                     f"{f'{hq}/{hkv}':>6} | " + " ".join(cell(tf.get(i), 9, 1) for i in impls)
                     + bar + " ".join(cell(r, 9, 3) for r in ratios))
    for c in columns:
        g = geomean(paper_ratios[c])
        name = "the faster of " + " and ".join(TITLES[p] for p in flash_peers) if c == "best" else TITLES[c]
        lines.append(f"geomean warpflash/{name} over the paper grid: "
                     + (f"{g:.3f} ({len(paper_ratios[c])} configs)" if g else "n/a"))
    return lines


def csv_row(row):
    ms, tf = row["ms_median"], row["tflops"]
    return dict(row, ms_median="n/a" if ms is None else f"{ms:.6f}",
                tflops="n/a" if tf is None else f"{tf:.3f}")


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def header(torch, commit=None):
    commit = commit or git_commit()
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "n/a"
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{date}, {torch.cuda.get_device_name()}, commit {commit}, torch {torch.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}, triton {triton_version}")


def main(argv=None):
    args = parse_args(argv)
    try:
        out = open(args.csv, "w", newline="") if args.csv else None  # fail before measuring
    except OSError as error:
        sys.exit(f"error: {error}")
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device visible to PyTorch")
    print(header(torch, args.commit), flush=True)
    failures = []
    rows = collect_rows(measure(torch, args, failures), out, CSV_COLUMNS, csv_row)
    print()
    print("\n".join(summary(rows, args.impls)))
    if args.plot_dir:
        from plot_results import plot_tflops

        points = [(r["impl"], r["dtype"], r["head_dim"], r["causal"], r["seqlen"], r["tflops"])
                  for r in rows if r["workload"] == "paper" and r["tflops"] is not None]
        for path in plot_tflops(points, args.plot_dir, args.title):
            print(f"wrote {path}")
    if failures:
        print(f"\n{len(failures)} FAILURE(S):\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
