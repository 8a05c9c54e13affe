import subprocess
from sim import simulate, fa3
d, bn, bm, ctas = 192, 112, 128, 132

def load(m, heads, batch):
    out = subprocess.run(['./dump', str(m), str(heads), str(batch), str(ctas)], capture_output=True, text=True).stdout
    rows = [tuple(map(int, l.split())) for l in out.split('\n') if l]
    return rows

def order_sectioned(m, heads, batch, paired, G):
    """tail order: sections of G heads (of the tail's), m-block slowest within a section."""
    nhb = heads * batch; tail = list(range(paired, nhb)); order = []
    for s0 in range(0, len(tail), G):
        sec = tail[s0:s0 + G]
        for inner in range(m):
            for hb in sec: order.append((m - 1 - inner, hb % heads, hb // heads))
    return order

def run(m, heads, batch, seqlen, G=None, cap=25 << 20):
    rows = load(m, heads, batch)
    seqs = [[] for _ in range(ctas)]
    paired_tiles = rows[0][6]; nhb = heads * batch
    tail_heads = nhb - paired_tiles // m
    order = order_sectioned(m, heads, batch, nhb - tail_heads, G or tail_heads)
    for c, r, mb, h, b, i, p in rows:
        seqs[c].append((mb, h, b) if i < p else order[i - p])
    return simulate(('static', seqs), ctas, seqlen, d, bn, bm, cap)

for seqlen, batch in ((2048, 8), (8192, 2)):
    heads = 10; m = seqlen // bm; kvh = seqlen * 2 * d * 2
    r, t = run(m, heads, batch, seqlen)
    rf, tf = simulate(fa3(m, heads, batch, kvh), ctas, seqlen, d, bn, bm, 25 << 20)
    print(f'{seqlen}: now {r/1e6:.0f} MB t {t:.0f}; fa3 {rf/1e6:.0f} t {tf:.0f}')
    for budget_mb in (8, 12, 16, 24, 32):
        G = max(1, (budget_mb << 20) // kvh)
        r, t = run(m, heads, batch, seqlen, G)
        print(f'   sections of {G} heads ({budget_mb} MB): {r/1e6:.0f} MB t {t:.0f}')
