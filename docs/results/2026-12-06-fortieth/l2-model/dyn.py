import subprocess
from sim import simulate
ctas = 132
def load_static(m, heads, batch):
    out = subprocess.run(['./dump', str(m), str(heads), str(batch), str(ctas)], capture_output=True, text=True).stdout
    seqs = [[] for _ in range(ctas)]
    for l in out.split('\n'):
        if l:
            c, r, mb, h, b, i, p = map(int, l.split()); seqs[c].append((mb, h, b))
    return ('static', seqs)
def sectioned_lpt(m, heads, batch, G):
    nhb = heads * batch; order = []
    for s0 in range(0, nhb, G):
        n = min(G, nhb - s0)
        for inner in range(m):
            for j in range(n):
                hb = s0 + j; order.append((m - 1 - inner, hb % heads, hb // heads))
    return ('dynamic', order)
cases = [  # name, d, bn, seqlen, batch, heads_q, hq_per_kv
    ('d192 2k', 192, 112, 2048, 8, 10, 1), ('d192 8k', 192, 112, 8192, 2, 10, 1),
    ('d128 2k', 128, 128, 2048, 8, 16, 1), ('d128 4k', 128, 128, 4096, 4, 16, 1), ('d128 8k', 128, 128, 8192, 2, 16, 1),
    ('d128 16k', 128, 128, 16384, 1, 16, 1),
    ('llama 4k', 128, 128, 4096, 4, 32, 4), ('llama 8k', 128, 128, 8192, 4, 32, 4),
    ('d256 2k', 256, 80, 2048, 8, 8, 1), ('d256 8k', 256, 80, 8192, 2, 8, 1),
    ('d64 8k', 64, 128, 8192, 2, 32, 1),
]
for name, d, bn, seqlen, batch, heads, g in cases:
    m = seqlen // 128; kv_per_q = seqlen * 2 * d * 2 // g
    res = []
    r, t = simulate(load_static(m, heads, batch), ctas, seqlen, d, bn, 128, 25 << 20, hq_per_kv=g)
    res.append(f'now {r/1e6:.0f}MB t{t:.0f}')
    for mb in (8, 16, 24, 32):
        G = max(1, (mb << 20) // kv_per_q)
        r, t = simulate(sectioned_lpt(m, heads, batch, G), ctas, seqlen, d, bn, 128, 25 << 20, hq_per_kv=g)
        res.append(f'{mb}MB/G{G}: {r/1e6:.0f}MB t{t:.0f}')
    print(name, ' | '.join(res), flush=True)
