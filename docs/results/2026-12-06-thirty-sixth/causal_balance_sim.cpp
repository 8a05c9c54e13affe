// The static causal tile order (tile_scheduler.h) simulated on the CPU: each CTA's K/V blocks
// (plus a per-tile overhead in blocks) over the paper's workload, 132 CTAs, no split tail.
//   g++ -O2 -std=c++17 -Isrc docs/results/2026-12-06-thirty-sixth/causal_balance_sim.cpp -o /tmp/sim && /tmp/sim
#include <cstdio>
#include <vector>
#include <algorithm>
#include "kernels/attention/tile_scheduler.h"
using namespace warpflash::kernels;
int main() {
  const int ctas = 132;
  for (int bn : {128, 160}) for (int seqlen : {2048, 4096, 8192, 16384}) for (double overhead : {0.0, 1.0, 2.0}) {
    int heads = 16, batch = 16384 / seqlen, bm = 128;
    ForwardTileScheduler s(ForwardTileScheduler::m_blocks_for(seqlen, bm), heads, batch, true);
    s.plan(ctas, bm);
    std::vector<double> work(ctas, 0);
    double total = 0;
    for (int c = 0; c < ctas; ++c)
      for (int r = 0;; ++r) {
        unsigned idx = s.tile_index(c, ctas, r);
        if (idx >= s.num_tiles()) break;
        TileCoord t = s.tile(idx);
        int keys = (t.m_block + 1) * bm;
        double blocks = (keys + bn - 1) / bn + overhead;
        work[c] += blocks; total += blocks;
      }
    double mx = *std::max_element(work.begin(), work.end());
    printf("bn %d seqlen %5d overhead %.0f: mean %.1f max %.1f efficiency %.3f\n", bn, seqlen, overhead, total / ctas, mx, total / ctas / mx);
  }
}
