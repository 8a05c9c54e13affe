#!/usr/bin/env python3
"""Summarizes a backward trace (per-CTA globaltimer stamps, ns) into fixed-cost shares."""
import struct, sys
from statistics import median
raw = open(sys.argv[1], 'rb').read()
dims = struct.unpack_from('3I', raw)
n = (len(raw) - 12) // 64
rows = [struct.unpack_from('8Q', raw, 12 + 64 * i) for i in range(n)]
rows = [r for r in rows if r[1] > 0]
t0 = min(r[1] for r in rows)
stop = lambda r: max(r[4], r[5])
span = max(stop(r) for r in rows) - t0
us = lambda x: x / 1000.0
med = lambda f: us(median(f(r) for r in rows))
print(f"grid {dims} CTAs {len(rows)} SMs {len(set(r[0] for r in rows))} span {us(span):.1f} us, tiles/CTA median {median(r[7] for r in rows):.0f}")
print(f"per CTA median us: start->kv {med(lambda r: r[2]-r[1]):.2f}  start->firstQ {med(lambda r: r[6]-r[1]):.2f}"
      f"  loop(firstQ->loopend) {med(lambda r: r[3]-r[6]):.2f}  per tile {med(lambda r: (r[3]-r[6])/max(r[7],1)):.3f}"
      f"  epilogue(loopend->consumers' end) {med(lambda r: r[4]-r[3]):.2f}  writer tail(loopend->writer end) {med(lambda r: r[5]-r[3]):.2f}")
by_sm = {}
for r in rows: by_sm.setdefault(r[0], []).append(r)
gaps, ramp, tail = [], 0, 0
for s, rs in by_sm.items():
    rs.sort(key=lambda r: r[1])
    ramp += rs[0][1] - t0; tail += span - (stop(rs[-1]) - t0)
    gaps += [b[1] - stop(a) for a, b in zip(rs[:-1], rs[1:])]
total = len(by_sm) * span
pro = sum(r[6] - r[1] for r in rows); loop = sum(r[3] - r[6] for r in rows); epi = sum(stop(r) - r[3] for r in rows)
print(f"SM-time shares: prologue(start->firstQ) {pro/total:.1%}  loop {loop/total:.1%}  epilogue+writer tail {epi/total:.1%}"
      f"  inter-CTA gaps {sum(max(g,0) for g in gaps)/total:.1%} (median {us(median(gaps)):.2f} us, max {us(max(gaps)):.2f})"
      f"  launch ramp {ramp/total:.1%}  end tail {tail/total:.1%}")
