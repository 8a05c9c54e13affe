import csv, sys, re, collections
def load(path):
    rows = list(csv.reader(open(path)))
    hdr = rows[1]; data = rows[2:]
    ix = {h:i for i,h in enumerate(hdr)}
    out = []
    for r in data:
        if len(r) < len(hdr): continue
        src = r[ix["Source"]].strip()
        op = src.split()[0] if src else ""
        if op.startswith("@"): op = src.split()[1]
        out.append((r[ix["Address"]], src, int(r[ix["Instructions Executed"]] or 0), int(r[ix["Warp Stall Sampling (All Samples)"]] or 0), {h: int(r[ix[h]] or 0) for h in hdr if h.startswith("stall_") and "Not Issued" not in h}))
    return out
for path in sys.argv[1:]:
    rows = load(path)
    tot = sum(r[2] for r in rows); samp = sum(r[3] for r in rows)
    by = collections.Counter(); bys = collections.Counter()
    for a, src, n, s, st in rows:
        base = src.split()[0] if not src.startswith("@") else src.split()[1]
        base = base.split(".")[0]
        by[base] += n; bys[base] += s
    print("==", path, "instructions", tot, "samples", samp)
    for op, n in by.most_common(28):
        print(f"  {op:12s} {n:12d} {100*n/tot:5.1f}%  samples {100*bys[op]/samp:5.1f}%")
    stalls = collections.Counter()
    for r in rows:
        for k, v in r[4].items(): stalls[k] += v
    print("  stalls:", ", ".join(f"{k[6:]} {100*v/samp:.1f}%" for k, v in stalls.most_common(10)))
