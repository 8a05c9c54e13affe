# CPU emulation (numpy) of the FP8 d = 256 kernel's error at the flaky test's shape; thirty-sixth
# session, docs/perf-notes.md (5b). Not faithful enough to decide (see there).
# CPU emulation of FP8 d=256 attention errors at 64 x 4097 (the flaky test's shape), to see
# which kernel behaviour could lift the relative L2 error above 2x P's rounding error.
import numpy as np, sys

def e4m3(x):
    a = np.abs(x); s = np.sign(x)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0))); e = np.maximum(e, -6)
    step = 2.0 ** (e - 3)
    r = np.round(a / step) * step
    return s * np.minimum(r, 448.0)

def trunc_sum(c, terms, F):
    # c (rows, cols) + sum over terms axis 1 of (rows, K, cols): each addend truncated to the
    # grid of the largest addend's exponent minus F fraction bits, then summed exactly.
    if F is None:
        return c + terms.sum(axis=1)
    allv = np.concatenate([c[:, None, :], terms], axis=1)
    mx = np.max(np.abs(allv), axis=1, keepdims=True)
    e = np.floor(np.log2(np.where(mx > 0, mx, 1.0)))
    grid = 2.0 ** (e - F)
    return np.sum(np.trunc(allv / grid) * grid, axis=1)

def quantize_blocks(x, rows):
    out = np.empty_like(x); scales = []
    for b in range(0, x.shape[0], rows):
        blk = x[b:b + rows]; sc = np.abs(blk).max() / 448.0
        sc = sc if sc > 0 else 1.0
        out[b:b + rows] = e4m3(blk / sc); scales.append(sc)
    return out, np.array(scales)

def run(seed, F_pv, F_s, lazy, sq=64, sk=4097, d=256, bn=64):
    rng = np.random.default_rng(seed)
    def vals(rows, scale, maxe):
        st = np.repeat(2.0 ** rng.integers(-maxe, maxe + 1, size=(rows + 31) // 32), 32)[:rows]
        return rng.normal(0, scale, size=(rows, d)) * st[:, None]
    qc, qs = quantize_blocks(vals(sq, 3.0, 1), 64)
    kc, ks = quantize_blocks(vals(sk, 0.5, 1), 128)
    vc, vs = quantize_blocks(vals(sk, 2.0, 3), 128)
    q = qc * np.repeat(qs, 64)[:sq, None]; k = kc * np.repeat(ks, 128)[:sk, None]; v = vc * np.repeat(vs, 128)[:sk, None]
    sm = 1 / np.sqrt(d)
    s = (q @ k.T) * sm
    m = s.max(1, keepdims=True); p = np.exp(s - m); l = p.sum(1, keepdims=True)
    o_ref = p @ v / l
    o_p = e4m3(p) @ v / l
    # Kernel order: blocks of bn keys from the last; S per block (FP8 WGMMA, k chunks of 32),
    # running (lazy) max in log2 units, P = exp2(.) rounded to e4m3, O += P V in chunks of 32.
    log2e = np.log2(np.e)
    nblocks = (sk + bn - 1) // bn
    row_max = np.full((sq, 1), -np.inf); lsum = np.zeros((sq, 1)); acc = np.zeros((sq, d)); o_unit = None
    for nb in reversed(range(nblocks)):
        lo, hi = nb * bn, min(sk, nb * bn + bn)
        kb = kc[lo:hi]; scale_log2 = sm * log2e * qs[0] * ks[lo // 128]
        sblk = qc @ kb.T  # S in codes (exact: the S GEMM's accumulation is not emulated)
        x = sblk * scale_log2
        new_max = np.maximum(row_max, x.max(1, keepdims=True))
        grows = (new_max - row_max > 8.0) if lazy else (new_max > row_max)
        ref = np.where(grows, new_max, row_max)
        corr = np.where(np.isfinite(row_max), np.exp2(row_max - ref), 0.0)
        row_max = ref
        pb = np.exp2(x - row_max)
        lsum = lsum * corr + pb.sum(1, keepdims=True)
        vsc = vs[lo // 128]
        if o_unit is None: o_unit = vsc
        acc = acc * corr * (o_unit / vsc); o_unit = vsc
        pr = e4m3(pb); vb = vc[lo:hi]
        for c0 in range(0, hi - lo, 32):
            prod = pr[:, c0:c0 + 32, None] * vb[None, c0:c0 + 32, :]  # (sq, 32, d)
            acc = trunc_sum(acc, prod, F_pv)
    o = acc * o_unit / lsum
    rel = lambda x: np.sqrt(((x - o_ref) ** 2).sum() / (o_ref ** 2).sum())
    return rel(o_p), rel(o)

if __name__ == "__main__":
  for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
      rp, exact = run(seed, None, None, True)
      _, t13 = run(seed, 13, None, True)
      _, t13n = run(seed, 13, None, False)
      print(f"seed {seed}: rel_p {rp:.4f} bound {2*rp+2**-8:.4f} | lazy exact-acc {exact:.4f} | lazy PV 13-bit {t13:.4f} | eager PV 13-bit {t13n:.4f}", flush=True)
