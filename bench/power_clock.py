#!/usr/bin/env python3
"""Sustained SM clock and board power of warpflash and the FlashAttention peers under
back-to-back forward launches, and what they make of them: FLOPs per clock per SM and
energy per FLOP.

Long attention runs sit at the board's power limit (H200: ~690 of 700 W), so the clock is
whatever that power allows, and TFLOP/s = clock x FLOPs per clock. This script separates
the two: a kernel that keeps the tensor cores busier does more per clock and pays with a
lower clock; one that wastes energy per FLOP loses both ways (docs/perf-notes.md,
twenty-sixth session).

Per point and implementation: --warmup launches, then launches for --seconds while a
thread samples `nvidia-smi --query-gpu=clocks.sm,power.draw` every 50 ms; the first two
samples are dropped and the rest's medians reported. The implementations take turns,
--repeats times. Points are BF16, name=batch,seqlen,heads_q,heads_kv,head_dim,causal.

    python3 bench/power_clock.py [--points "d128c4k=4,4096,16,16,128,1;llama4k=4,4096,32,8,128,1"]
"""
import argparse
import statistics
import subprocess
import threading
import time

from bench_common import attention_flops, flash_attention_peers

DEFAULT_POINTS = ("d128-causal-4k=4,4096,16,16,128,1;d128-4k=4,4096,16,16,128,0;"
                  "llama3-8b-4k=4,4096,32,8,128,1;d256-causal-4k=4,4096,8,8,256,1")


def parse_points(text):
    points = []
    for item in text.split(";"):
        name, _, fields = item.partition("=")
        values = [int(x) for x in fields.split(",")]
        if len(values) != 6:
            raise argparse.ArgumentTypeError(
                f"point '{item}': expected name=batch,seqlen,heads_q,heads_kv,head_dim,causal")
        points.append((name, *values[:5], bool(values[5])))
    return points


def sample_gpu(stop, samples):
    """(SM clock MHz, power W) pairs from nvidia-smi until `stop` is set."""
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.split("\n")[0].split(",")
        samples.append((float(out[0]), float(out[1])))
        time.sleep(0.05)


def sustained(torch, fn, seconds, warmup):
    """(ms per launch, median clock MHz, median power W) over `seconds` of launches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=sample_gpu, args=(stop, samples))
    sampler.start()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    launches, began = 0, time.time()
    start.record()
    while time.time() - began < seconds:
        for _ in range(20):
            fn()
        launches += 20
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    stop.set()
    sampler.join()
    kept = samples[2:] or samples
    return (start.elapsed_time(end) / launches, statistics.median(s[0] for s in kept),
            statistics.median(s[1] for s in kept))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=parse_points, default=parse_points(DEFAULT_POINTS),
                        help="name=batch,seqlen,heads_q,heads_kv,head_dim,causal;... (default: four 4k points)")
    parser.add_argument("--seconds", type=float, default=2.5, help="launch time per measurement")
    parser.add_argument("--warmup", type=int, default=50, help="launches before each measurement")
    parser.add_argument("--repeats", type=int, default=2, help="turns of all implementations per point")
    args = parser.parse_args()

    import torch
    import warpflash

    found, missing = flash_attention_peers()
    for name, why in missing.items():
        print(f"# {name}: skipped: {why}")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{'point':<16} {'impl':<9} {'TFLOP/s':>8} {'MHz':>6} {'W':>5} {'FLOP/clk/SM':>11} {'pJ/FLOP':>8}")
    for name, batch, seqlen, heads_q, heads_kv, head_dim, causal in args.points:
        q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=torch.bfloat16)
                   for heads in (heads_q, heads_kv, heads_kv))
        flops = attention_flops(batch, heads_q, seqlen, seqlen, head_dim, causal)
        impls = {"warpflash": lambda: warpflash.flash_attn_func(q, k, v, causal=causal)}
        for peer, module in found.items():
            impls[peer] = (lambda m: lambda: m.flash_attn_func(q, k, v, causal=causal))(module)
        for _ in range(args.repeats):
            for impl, fn in impls.items():
                ms, mhz, watts = sustained(torch, fn, args.seconds, args.warmup)
                per_second = flops / (ms * 1e-3)
                print(f"{name:<16} {impl:<9} {per_second / 1e12:8.1f} {mhz:6.0f} {watts:5.0f} "
                      f"{per_second / (mhz * 1e6) / sms:11.0f} {watts / per_second * 1e12:8.3f}", flush=True)
        del q, k, v


if __name__ == "__main__":
    main()
