# L2 model of the causal forward's K/V, Q and O traffic: CTAs walk their tiles (one block a
# time step, last block first), an LRU cache of `cap` bytes; returns DRAM read bytes.
import heapq, subprocess, sys
from collections import OrderedDict

def ours(m, heads, batch, ctas):
    out = subprocess.run(['./dump', str(m), str(heads), str(batch), str(ctas)], capture_output=True, text=True).stdout
    seqs = [[] for _ in range(ctas)]
    for line in out.split('\n'):
        if line:
            c, r, mb, h, b = map(int, line.split()[:5]); seqs[c].append((mb, h, b))
    return ('static', seqs)

def fa3(m, heads, batch, kv_bytes_head, l2=32 << 20):
    nhb = heads * batch
    sw = max(1, l2 // kv_bytes_head); p = 1
    while p * 2 <= sw: p *= 2
    sw = min(p, nhb)
    order = []
    for sec0 in range(0, nhb, sw):
        n = min(sw, nhb - sec0)
        for blk in range(m):
            for j in range(n):
                bhb = sec0 + j; order.append((m - 1 - blk, bhb % heads, bhb // heads))
    return ('dynamic', order)

def simulate(kind_tiles, ctas, seqlen, d, bn, bm, cap, hq_per_kv=1, overhead=1.0, q_evict_first=False):
    kind, tiles = kind_tiles
    kvb = bn * d * 2; qb = bm * d * 2
    cache = OrderedDict(); size = [0]; reads = [0]
    def access(key, nbytes, write=False):
        if key in cache:
            cache.move_to_end(key); return
        if not write: reads[0] += nbytes
        cache[key] = nbytes; size[0] += nbytes
        while size[0] > cap:
            k, v = cache.popitem(last=False); size[0] -= v
    def nblocks(mb):
        return (min((mb + 1) * bm, seqlen) + bn - 1) // bn
    # per CTA: a generator of (time cost, accesses)
    def work(tile):
        mb, h, b = tile; g = h // hq_per_kv
        yield overhead, [(('Q', b, h, mb), qb, False)]
        for n in range(nblocks(mb) - 1, -1, -1):
            yield 1.0, [(('K', b, g, n), kvb, False), (('V', b, g, n), kvb, False)]
        yield 0.0, [(('O', b, h, mb), qb, True)]
    nxt = [0]
    def next_tile(c):
        if kind == 'static':
            return tiles[c].pop(0) if tiles[c] else None
        if nxt[0] < len(tiles):
            nxt[0] += 1; return tiles[nxt[0] - 1]
        return None
    gens = {}; heap = []
    for c in range(ctas):
        t = next_tile(c)
        if t is not None:
            gens[c] = work(t); heapq.heappush(heap, (0.0, c))
    end = 0
    while heap:
        time, c = heapq.heappop(heap)
        try:
            cost, acc = next(gens[c])
        except StopIteration:
            t = next_tile(c)
            if t is None:
                end = max(end, time); continue
            gens[c] = work(t); heapq.heappush(heap, (time, c)); continue
        for key, nb, w in acc: access(key, nb, w)
        heapq.heappush(heap, (time + cost, c))
    return reads[0], end

if __name__ == '__main__':
    d, bn, bm, ctas = 192, 112, 128, 132
    for seqlen, batch in ((2048, 8), (8192, 2)):
        heads = 10; m = seqlen // bm
        kvh = seqlen * 2 * d * 2
        for cap_mb in (25, 35, 50):
            cap = cap_mb << 20
            r1, t1 = simulate(ours(m, heads, batch, ctas), ctas, seqlen, d, bn, bm, cap)
            r2, t2 = simulate(fa3(m, heads, batch, kvh), ctas, seqlen, d, bn, bm, cap)
            print(f'seqlen {seqlen} L2 {cap_mb} MB: ours {r1/1e6:.0f} MB (t {t1:.0f}), fa3 {r2/1e6:.0f} MB (t {t2:.0f})', flush=True)
