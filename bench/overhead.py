#!/usr/bin/env python3
"""Wrapper overhead of the Python package on a tiny problem (batch 1, seqlen 128, 8 heads,
head_dim 128, bf16, non-causal), where launch cost, not the kernel, sets the time per call.

Time per call = wall time of N back-to-back calls on one stream, then one synchronize,
divided by N (after warm-up), for: the C++ API (`warpflash_bench --latency`, which prints
`latency_us_per_call <float>`), warpflash.flash_attn_func, and torch.ops.warpflash.forward
(the dispatcher's operator); the median of --repeats measurements each.
Exits non-zero when flash_attn_func is more than --max-ratio times slower than the C++ API.

    python3 bench/overhead.py --bench-binary build/bench/warpflash_bench
"""
import argparse
import shlex
import subprocess
import sys
import time

from bench_common import positive_int

BATCH, SEQLEN, HEADS, HEAD_DIM = 1, 128, 8, 128


def cpp_latency_us(binary, iters, warmup, repeats, extra_args):
    """Median over `repeats` runs of `binary --latency`'s latency_us_per_call."""
    command = [binary, "--latency", "--iters", str(iters), "--warmup", str(warmup)]
    command += shlex.split(extra_args)
    samples = []
    for _ in range(repeats):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as error:
            sys.exit(f"error: running {' '.join(command)}: {error}")
        values = [line.split()[1] for line in done.stdout.splitlines()
                  if len(line.split()) == 2 and line.split()[0] == "latency_us_per_call"]
        if done.returncode != 0 or not values:
            sys.exit(f"error: {' '.join(command)} exited with {done.returncode} and printed no "
                     f"'latency_us_per_call <float>' line\nstdout:\n{done.stdout}\n"
                     f"stderr:\n{done.stderr}")
        samples.append(float(values[-1]))
    return sorted(samples)[len(samples) // 2]


def python_latency_us(torch, fn, iters, warmup, repeats):
    """Median over `repeats` of: wall time of `iters` back-to-back calls + synchronize, / iters."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / iters * 1e6)
    return sorted(samples)[len(samples) // 2]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-binary", default="build/bench/warpflash_bench")
    parser.add_argument("--bench-args", default="", help="extra arguments for the binary")
    parser.add_argument("--iters", type=positive_int, default=2000,
                        help="calls per measurement (passed to the binary too)")
    parser.add_argument("--warmup", type=positive_int, default=200)
    parser.add_argument("--repeats", type=positive_int, default=5,
                        help="measurements (runs of the binary); the median counts")
    parser.add_argument("--max-ratio", type=float, default=1.5,
                        help="largest flash_attn_func / C++ time per call that passes")
    args = parser.parse_args(argv)

    # The binary first, before this process holds the GPU.
    cpp = cpp_latency_us(args.bench_binary, args.iters, args.warmup, args.repeats, args.bench_args)
    import torch
    import warpflash

    q, k, v = (torch.randn(BATCH, SEQLEN, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    scale = HEAD_DIM ** -0.5
    measure = lambda fn: python_latency_us(torch, fn, args.iters, args.warmup, args.repeats)  # noqa: E731
    func = measure(lambda: warpflash.flash_attn_func(q, k, v))
    op = measure(lambda: torch.ops.warpflash.forward(q, k, v, None, None, None, None, 0, 0, scale, False, -1, -1, 0, 0.0,
                                                     None))
    print(f"problem: batch {BATCH}, seqlen {SEQLEN}, heads {HEADS}, head_dim {HEAD_DIM}, bf16, "
          f"non-causal; {torch.cuda.get_device_name()}")
    print(f"C++ warpflash::forward        {cpp:8.2f} us/call")
    print(f"torch.ops.warpflash.forward   {op:8.2f} us/call  ({op / cpp:.2f}x C++)")
    print(f"warpflash.flash_attn_func     {func:8.2f} us/call  ({func / cpp:.2f}x C++)")
    if func / cpp > args.max_ratio:
        sys.exit(f"FAILED: flash_attn_func takes {func / cpp:.2f}x the C++ API's time per call "
                 f"(limit {args.max_ratio})")


if __name__ == "__main__":
    main()
