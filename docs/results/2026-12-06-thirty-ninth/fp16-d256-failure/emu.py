# CPU emulation of the FP16 d = 256 kernel (128 x 64 blocks, last block first, lazy or eager
# rescaling, P rounded to FP16, fp32 sums) on the inputs of the failing GPU test
# (fp16_d256_full_b7_q64_k300_h16_kv2, seed 144725981), written by gen.cpp:
#   g++ -O2 -std=c++17 -Itests -Isrc -Iinclude gen.cpp build/src/libwarpflash_reference.a -o gen
#   ./gen 144725981 && python3 emu.py   (numpy; thirty-ninth session, docs/perf-notes.md)
#   BF16: ./gen SEED bf16 && BF16=1 python3 emu.py
import numpy as np
B,SQ,SK,HQ,HK,D=7,64,300,16,2,256
q=np.fromfile('q.f32',np.float32).reshape(B,SQ,HQ,D)
k=np.fromfile('k.f32',np.float32).reshape(B,SK,HK,D)
v=np.fromfile('v.f32',np.float32).reshape(B,SK,HK,D)
scale=1/np.sqrt(D); sl=np.float32(scale*np.log2(np.e))
import os
def f16(x):
    if os.environ.get('BF16'):
        b=np.asarray(x,np.float32).view(np.uint32).astype(np.uint64)
        b=((b+0x7FFF+((b>>16)&1))>>16)<<16
        return b.astype(np.uint32).view(np.float32)
    return x.astype(np.float16).astype(np.float32)
ref=np.zeros((B,SQ,HQ,D)); low=np.zeros_like(ref); lazy=np.zeros_like(ref); eager=np.zeros_like(ref)
for b in range(B):
  for h in range(HQ):
    g=h//(HQ//HK)
    Q=q[b,:,h].astype(np.float64); K=k[b,:,g].astype(np.float64); V=v[b,:,g].astype(np.float64)
    S=Q@K.T
    s=S*scale; m=s.max(1,keepdims=True); p=np.exp(s-m); l=p.sum(1,keepdims=True)
    ref[b,:,h]=p@V/l
    # low-precision reference: float, P normalized then rounded
    s32=(S.astype(np.float32)*np.float32(scale)); m32=s32.max(1,keepdims=True); p32=np.exp(s32-m32); l32=p32.sum(1,keepdims=True)
    low[b,:,h]=f16((f16(p32/l32).astype(np.float64)@V))
    S32=S.astype(np.float32)
    for thr,out in ((8.0,lazy),(0.0,eager)):
      rmax=np.full(SQ,-np.inf,np.float32); rsum=np.zeros(SQ,np.float32); O=np.zeros((SQ,D),np.float32)
      for n0 in range(256,-1,-64):
        blk=S32[:,n0:n0+64]
        nm=np.maximum(rmax,blk.max(1))
        grows=(nm*sl-rmax*sl>thr) if thr>0 else np.ones(SQ,bool)
        nm=np.where(grows,nm,rmax)
        ms=np.where(nm==-np.inf,0,nm*sl).astype(np.float32)
        corr=np.where(grows,np.exp2(rmax*sl-ms),1).astype(np.float32)
        rmax=nm
        P=np.exp2(blk*sl-ms[:,None]).astype(np.float32)
        rsum=rsum*corr+P.sum(1)
        O=O*corr[:,None]+(f16(P).astype(np.float64)@V[n0:n0+64]).astype(np.float32)
      out[b,:,h]=f16(O/rsum[:,None])
for name,x in (('low',low),('lazy',lazy),('eager',eager)):
  e=np.abs(x-ref); i=np.unravel_index(e.argmax(),e.shape)
  print(name,'max abs %.3e'%e.max(),'at',i,'ref %.4f'%ref[i],'rel_l2 %.3e'%np.sqrt((e**2).sum()/(ref**2).sum()))
print('bound 2*low+2^-12 = %.3e'%(2*np.abs(low-ref).max()+(2**-9 if os.environ.get('BF16') else 2**-12)), 'max |ref| %.3f'%np.abs(ref).max())
i=(1,55,4,136)
print('at',i,'ref %.6f lazy %.6f eager %.6f low %.6f'%(ref[i],lazy[i],eager[i],low[i]))
# the same row without the final rounding
b,r,h,d=i; g=h//8
Q=q[b,r,h].astype(np.float64); K=k[b,:,g].astype(np.float64); V=v[b,:,g].astype(np.float64)
S32=(K@Q).astype(np.float32); w=np.exp((S32*scale)-(S32*scale).max()); w/=w.sum()
print('largest weight %.3f, effective keys %.1f'%(w.max(),1/(w**2).sum()))
for thr in (8.0,0.0):
  rmax=np.float32(-np.inf); rsum=np.float32(0); O=np.zeros(D,np.float32); deltas=[]
  for n0 in range(256,-1,-64):
    blk=S32[n0:n0+64]; nm=max(rmax,blk.max())
    grows=(nm*sl-rmax*sl>thr) if thr>0 else True
    if not grows: nm=rmax
    ms=np.float32(nm*sl); corr=np.float32(np.exp2(rmax*sl-ms)) if grows else np.float32(1); rmax=nm
    P=np.exp2(blk*sl-ms).astype(np.float32); rsum=rsum*corr+P.sum()
    O=O*corr+(f16(P).astype(np.float64)@V[n0:n0+64]).astype(np.float32); deltas.append(float(blk.max()*sl-ms))
  print('thr',thr,'pre-rounding %.6f err %.2e'%(O[d]/rsum,O[d]/rsum-ref[i]),'block max - ref max (log2):',['%.2f'%x for x in deltas])
