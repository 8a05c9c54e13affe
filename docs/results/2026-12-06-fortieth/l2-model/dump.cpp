// Dumps each CTA's causal tile sequence from the real scheduler: cta round m_block head batch
#include <cstdio>
#include <cstdlib>
#include "kernels/attention/tile_scheduler.h"
using namespace warpflash::kernels;
int main(int argc, char** argv) {
  int m = atoi(argv[1]), heads = atoi(argv[2]), batch = atoi(argv[3]), ctas = atoi(argv[4]);
  ForwardTileScheduler s{m, heads, batch, true};
  s.plan(ctas, 128);
  for (int cta = 0; cta < ctas; ++cta)
    for (int round = 0;; ++round) {
      unsigned i = s.tile_index(cta, ctas, round);
      if (i >= s.num_tiles()) break;
      TileCoord t = s.tile(i);
      printf("%d %d %d %d %d %u %d\n", cta, round, t.m_block, t.head, t.batch, i, 2 * s.paired_units);
    }
}
