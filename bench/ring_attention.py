"""Ring attention (warpflash.distributed.ring_flash_attn_func) throughput, forward + backward,
on every rank of a torchrun launch, against the ideal: world_size times one GPU's warpflash
forward + backward on a rank's share of the work. Also times one turn of the K/V shards
around the ring alone, and reports how much of it the ring hides under the attention.

    torchrun --nproc_per_node N bench/ring_attention.py [--tokens-per-rank 131072]
             [--heads 32/8] [--head-dim 128] [--causal both|0|1] [--layout zigzag] [--iters 5]

FLOPs: 4 * b * h * S^2 * d for the whole sequence S = world_size * tokens per rank (halved
when causal), times 3.5 for forward + backward (the backward counts 2.5x the forward).
Timing: CUDA events around each step (every rank times its own; rank 0 prints the slowest
rank's median). --device cpu runs the same on gloo ranks with the float64 CPU path (a smoke
test of the script, not a benchmark).
"""
import argparse
import os
import sys

from bench_common import causal_values, median, positive_int, tflops


def parse_heads(text):
    heads_q, _, heads_kv = text.partition("/")
    return int(heads_q), int(heads_kv or heads_q)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens-per-rank", type=positive_int, default=131072)
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=parse_heads, default=(32, 8), help="heads_q/heads_kv, e.g. 32/8")
    parser.add_argument("--head-dim", type=positive_int, default=128)
    parser.add_argument("--causal", choices=("both", "0", "1"), default="both")
    parser.add_argument("--layout", choices=("zigzag", "contiguous"), default="zigzag")
    parser.add_argument("--iters", type=positive_int, default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off
    import torch
    import torch.distributed as dist
    from warpflash import flash_attn_func
    from warpflash.distributed import ring_flash_attn_func

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if cuda else torch.float64
    heads_q, heads_kv = args.heads
    local = args.tokens_per_rank
    shape_q, shape_kv = (args.batch, local, heads_q, args.head_dim), (args.batch, local, heads_kv, args.head_dim)
    q, k, v = (torch.randn(s, device=device, dtype=dtype, requires_grad=True) for s in (shape_q, shape_kv, shape_kv))
    d_out = torch.randn(shape_q, device=device, dtype=dtype)

    def time_ms(fn):
        """Median ms of fn over --iters runs after one warm-up, the slowest rank's."""
        fn()
        times = []
        for _ in range(args.iters):
            dist.barrier()
            if cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop))
            else:
                import time
                begin = time.perf_counter()
                fn()
                times.append((time.perf_counter() - begin) * 1e3)
        slowest = torch.tensor([median(times)], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return slowest.item()

    def kv_turn():
        """The K/V shards once around the ring, nothing computed."""
        k_cur, v_cur = k.detach(), v.detach()
        for _ in range(world_size - 1):
            k_next, v_next = torch.empty_like(k_cur), torch.empty_like(v_cur)
            after, before = (rank + 1) % world_size, (rank - 1) % world_size
            ops = [dist.P2POp(dist.isend, k_cur, after), dist.P2POp(dist.isend, v_cur, after),
                   dist.P2POp(dist.irecv, k_next, before), dist.P2POp(dist.irecv, v_next, before)]
            for request in dist.batch_isend_irecv(ops):
                request.wait()
            k_cur, v_cur = k_next, v_next

    if rank == 0:
        print(f"# {world_size} ranks ({device.type}), {local} tokens per rank, batch {args.batch}, heads "
              f"{heads_q}/{heads_kv}, head_dim {args.head_dim}, layout {args.layout}, {dtype}")
        print("| causal | sequence | ring fwd+bwd ms | TFLOP/s (all ranks) | one rank's share alone ms | "
              "ideal ms | / ideal | K/V turn alone ms |")
        print("|---|---|---|---|---|---|---|---|")
    comm_ms = time_ms(kv_turn)
    for causal in causal_values(args.causal):
        def ring_step():
            out = ring_flash_attn_func(q, k, v, causal=causal, layout=args.layout)
            out.backward(d_out)

        ring_ms = time_ms(ring_step)
        sequence = world_size * local
        flops = 3.5 * 4.0 * args.batch * heads_q * sequence * sequence * args.head_dim / (2.0 if causal else 1.0)
        # The ideal: every rank computes 1 / world_size of the work at one GPU's rate,
        # measured on warpflash's own forward + backward over a rank's tokens (non-causal:
        # local x local is 1 / world_size^2 of the whole; causal: the causal local square).
        alone_ms = float("nan")
        if cuda:
            def alone_step():
                out = flash_attn_func(q, k, v, causal=causal)
                out.backward(d_out)

            alone_ms = time_ms(alone_step)
            alone_flops = 3.5 * 4.0 * args.batch * heads_q * local * local * args.head_dim / (2.0 if causal else 1.0)
            ideal_ms = flops / world_size / (alone_flops / alone_ms)
        else:
            ideal_ms = float("nan")
        if rank == 0:
            print(f"| {int(causal)} | {sequence} | {ring_ms:.1f} | {tflops(flops, ring_ms):.0f} | {alone_ms:.1f} | "
                  f"{ideal_ms:.1f} | {ideal_ms / ring_ms:.2f} | {comm_ms:.1f} |", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
