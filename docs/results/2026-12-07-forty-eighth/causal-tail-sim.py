import heapq, math
def order(T, M, sections):  # sections: list of head counts; longest first within a section, heads fastest
    out=[]; h0=0
    for s in sections:
        for inner in range(M):
            for h in range(s): out.append((h0+h, M-1-inner))
        h0+=s
    assert h0==T
    return out
def makespan(tiles, ctas, overhead=0.3):
    pq=[(0.0,c) for c in range(ctas)]; heapq.heapify(pq); busy=[0.0]*ctas
    for (h,m) in tiles:
        t,c=heapq.heappop(pq); cost=m+1+overhead; busy[c]+=cost; heapq.heappush(pq,(t+cost,c))
    end=max(t for t,c in pq); avg=sum(busy)/ctas
    return end/avg
def current(T,s):
    s=min(s,T); n=T//s; r=T%s; return [s]*n+([r] if r else [])
def proposal(T,s,M,ctas):
    b=math.ceil(2*ctas/(M+1)); s=min(s,T)
    if T<=b: return [T]
    L=b; rest=T-L; n=rest//s; r=rest%s
    return ([r] if r else [])+[s]*n+[L]
def proposal_lastmerge(T,s,M,ctas):
    b=math.ceil(2*ctas/(M+1)); s=min(s,T)
    if T<=b: return [T]
    k=(T-b)//s; return [s]*k+[T-k*s]
ctas=132
L2=16<<20
for name,seq,heads,batch,d,dv in [("d192/128 2k",2048,10,8,192,128),("d192 2k",2048,10,8,192,192),("d192 1k",1024,10,16,192,192),("d192 4k",4096,10,4,192,192),("d192 8k",8192,10,2,192,192),
   ("d256 2k (128x64)",2048,8,8,256,256),("d256 1k",1024,8,16,256,256),("d256 4k",4096,8,4,256,256),("d128 4k",4096,16,4,128,128),("d128 8k long",8192,16,2,128,128),("d128 16k long",16384,16,1,128,128),("d64 2k",2048,32,8,64,64),("llama 4k",4096,32,4,128,128)]:
    M=seq//128; T=heads*batch
    per=seq*(d+dv)*2
    if name.startswith("llama"): per=per*8//32
    s=max(1,L2//per)
    cur=current(T,s); p=proposal(T,s,M,ctas); p2=proposal_lastmerge(T,s,M,ctas)
    print(f"{name:18s} M={M:3d} T={T:3d} s={s:3d} cur={makespan(order(T,M,cur),ctas):.3f} {cur[-2:]}  first-partial={makespan(order(T,M,p),ctas):.3f} {p[:1]+p[-1:]} ({p[-1]*per/2**20:.0f}MB)  merge={makespan(order(T,M,p2),ctas):.3f} last {p2[-1]}")
print("---- sweep")
import itertools
def merged(T,s,b):
    s=min(s,T); full=(T-1)//s
    if T-full*s < b: full=max(0,(T-b)//s)
    return [s]*full+[T-full*s]
for d,dv,blk in [(64,64,128),(128,128,128),(192,128,128),(192,192,128),(256,256,128)]:
  for seq in [1024,2048,4096,8192,16384]:
    for hkv_ratio in [1,4]:
      heads=2048//d; batch=16384//seq; M=seq//blk; T=heads*batch
      per=seq*(d+dv)*2//hkv_ratio; s=max(1,L2//per)
      b=math.ceil(2*ctas/(M+1))
      cur=current(T,s); mg=merged(T,s,b)
      a=makespan(order(T,M,cur),ctas); m=makespan(order(T,M,mg),ctas)
      flag = "  <-- changed" if cur!=mg else ""
      print(f"d{d}/{dv} {seq:5d} g{hkv_ratio} M={M:3d} T={T:3d} s={s:3d} b={b:3d} cur={a:.3f} last {cur[-1]:3d} merged={m:.3f} last {mg[-1]:3d} ({mg[-1]*per/2**20:.0f}MB) gain {a/m:.3f}{flag}")
