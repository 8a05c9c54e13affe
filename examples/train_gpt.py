"""Trains a small GPT-style model twice from the same seed, once with warpflash's attention
and once with PyTorch's scaled_dot_product_attention, on data it makes itself, and prints
both loss curves and tokens per second. The curves should agree within bf16 noise.

The data (no downloads): a fixed random second-order Markov source over 64 symbols whose
next-symbol logits add a term of the current symbol and one of the symbol before it. A model
without attention sees only the current symbol and cannot get below H(next | current); the
second term is reachable only by attending to the previous position.

    python3 examples/train_gpt.py [--steps 300] [--layers 4] [--heads 4] [--head-dim 128]
                                  [--seqlen 256] [--batch 32] [--check]

--check exits non-zero when the final losses differ by more than 2% or either run ends above
H(next | current) (its attention did not learn to look back).
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F


def markov_source(vocab, seed, sharpness=3.0):
    """table[a, b] = P(next | the symbol before a, the current symbol b) = softmax(s (A[a] + B[b]))."""
    generator = torch.Generator().manual_seed(seed)
    before, current = (torch.randn(vocab, vocab, generator=generator) for _ in range(2))
    return torch.softmax(sharpness * (before[:, None, :] + current[None, :, :]), dim=-1)


def entropies(table):
    """H(next | both symbols) and H(next | current symbol) under the chain's stationary
    distribution: the lowest losses with attention and without it (a model that sees only
    the current symbol)."""
    pairs = torch.full(table.shape[:2], 1.0 / table.shape[0] ** 2, dtype=torch.float64)
    table = table.double()
    for _ in range(200):  # power iteration over (symbol before, current symbol)
        pairs = (pairs[:, :, None] * table).sum(0)
    full = -(pairs[:, :, None] * table * table.log()).sum().item()
    current_only = (pairs[:, :, None] * table).sum(0) / pairs.sum(0)[:, None]  # P(next | current)
    without = -(pairs[:, :, None] * table * current_only[None].log()).sum().item()
    return full, without


def sample_batch(table, batch, seqlen, generator):
    vocab = table.shape[0]
    tokens = torch.empty(batch, seqlen + 1, dtype=torch.long)
    tokens[:, :2] = torch.randint(vocab, (batch, 2), generator=generator)
    for t in range(2, seqlen + 1):
        probs = table[tokens[:, t - 2], tokens[:, t - 1]]
        tokens[:, t] = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return tokens[:, :-1], tokens[:, 1:]


class Block(torch.nn.Module):
    def __init__(self, dim, heads, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        x = x + self.proj(self.attention(q, k, v).reshape(b, s, dim))
        return x + self.mlp(self.norm2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab, seqlen, layers, heads, head_dim, attention):
        super().__init__()
        dim = heads * head_dim
        self.embed, self.position = torch.nn.Embedding(vocab, dim), torch.nn.Parameter(torch.zeros(seqlen, dim))
        self.blocks = torch.nn.ModuleList(Block(dim, heads, attention) for _ in range(layers))
        self.norm, self.head = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def warpflash_attention(q, k, v):  # (batch, seqlen, heads, head_dim), as FlashAttention takes them
    from warpflash import flash_attn_func

    return flash_attn_func(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=True)


def sdpa_attention(q, k, v):  # SDPA takes (batch, heads, seqlen, head_dim)
    out = F.scaled_dot_product_attention(q.bfloat16().transpose(1, 2), k.bfloat16().transpose(1, 2),
                                         v.bfloat16().transpose(1, 2), is_causal=True)
    return out.transpose(1, 2)


def train(attention, args, table):
    torch.manual_seed(args.seed)
    model = GPT(table.shape[0], args.seqlen, args.layers, args.heads, args.head_dim, attention).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.Generator().manual_seed(args.seed + 1)
    batches = [sample_batch(table, args.batch, args.seqlen, data) for _ in range(args.distinct_batches)]
    losses, elapsed = [], 0.0
    for step in range(args.steps):
        inputs, targets = (t.cuda(non_blocking=True) for t in batches[step % len(batches)])
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(inputs).float().view(-1, table.shape[0]), targets.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        if step >= 5:  # the first steps pay for allocation and compilation
            elapsed += time.perf_counter() - start
        losses.append(loss.item())
    tokens_per_second = (args.steps - 5) * args.batch * args.seqlen / elapsed
    return losses, tokens_per_second


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--seqlen", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64, help="the source's symbols (vocab^2 contexts to learn)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--distinct-batches", type=int, default=64, help="batches sampled once and cycled through")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    table = markov_source(args.vocab, args.seed)
    floor, floor_without_attention = entropies(table)
    runs = {"warpflash": train(warpflash_attention, args, table), "sdpa": train(sdpa_attention, args, table)}
    print(f"# {args.layers} layers, {args.heads} heads of {args.head_dim}, seqlen {args.seqlen}, batch {args.batch}; "
          f"losses in nats: a perfect model {floor:.3f}, without attention {floor_without_attention:.3f}, "
          f"a uniform guess {math.log(args.vocab):.3f}")
    print("step " + "".join(f"{name:>12s}" for name in runs))
    for step in list(range(0, args.steps, max(1, args.steps // 12))) + [args.steps - 1]:
        print(f"{step:4d} " + "".join(f"{losses[step]:12.4f}" for losses, _ in runs.values()))
    for name, (_, rate) in runs.items():
        print(f"# {name}: {rate:,.0f} tokens/s")
    final = {name: losses[-1] for name, (losses, _) in runs.items()}
    gap = abs(final["warpflash"] - final["sdpa"]) / final["sdpa"]
    print(f"# final losses differ by {100 * gap:.2f}%")
    if args.check:
        looked_back = all(loss < floor_without_attention for loss in final.values())
        if gap > 0.02 or not looked_back:
            print("# check failed: " + ("the final losses differ by more than 2%" if gap > 0.02 else
                                         "a run ended above the loss reachable without attention"))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
