from sim import *
import sim
# reads by phase: tag tiles by whether they are in the pairs phase (ours)
d, bn, bm, ctas = 192, 112, 128, 132
for seqlen, batch in ((2048, 8), (8192, 2)):
    heads = 10; m = seqlen // bm
    kind, seqs = ours(m, heads, batch, ctas)
    # the tail heads: those in the last tail_heads of (batch*heads)
    tail = -(-4 * ctas // m); nhb = heads * batch; paired = (nhb - tail) & ~1
    print(seqlen, 'paired heads', paired, 'tail heads', nhb - paired)
    # split: simulate only pairs-phase tiles, then all
    pairs_only = [[t for t in s if t[2] * heads + t[1] < paired] for s in seqs]
    r1, _ = simulate(('static', pairs_only), ctas, seqlen, d, bn, bm, 25 << 20)
    r2, _ = simulate(('static', [list(s) for s in seqs]), ctas, seqlen, d, bn, bm, 25 << 20)
    kvh = seqlen * 2 * d * 2
    print(f'  pairs only {r1/1e6:.0f} MB (min {paired*(kvh + seqlen*d*2)/1e6:.0f}), all {r2/1e6:.0f} MB')
