// The merge of a split tile's pieces: one CTA per four rows of a split tile, a thread per
// four columns.
#include "kernels/attention/split_combine.h"

#include <cmath>

#include <cutlass/numeric_types.h>

#include "kernels/attention/check_cuda.h"
#include "kernels/attention/dependent_launch.h"

namespace warpflash::kernels {
namespace {

constexpr int kRowsPerCta = 4;
constexpr int kColumnsPerThread = 4;

// Row `row_in_tile` of tile `tile` from the `pieces` slots slot_of(0 .. pieces - 1).
template <class Element, class SlotOf>
__device__ void merge_row(SplitCombineParams const& params, TileCoord tile, int row_in_tile, int pieces,
                          SlotOf&& slot_of) {
  int const row = tile.m_block * params.block_m + row_in_tile;
  auto piece_lse = [&](int i) { return slot_of(i)[params.block_m * params.head_dim + row_in_tile]; };
  float lse_max = -INFINITY;
  for (int i = 0; i < pieces; ++i) lse_max = fmaxf(lse_max, piece_lse(i));
  float sum = 0.f;
  if (lse_max != -INFINITY) {
    for (int i = 0; i < pieces; ++i) sum += expf(piece_lse(i) - lse_max);
  }
  float const lse = lse_max == -INFINITY ? -INFINITY : lse_max + logf(sum);

  unsigned head_in_group;
  unsigned position = params.by_pack.divmod(unsigned(row), head_in_group);
  Element* o_row = static_cast<Element*>(params.o) + tile.batch * params.o_batch_stride +
                   position * params.o_seqlen_stride + head_in_group * params.o_group_stride +
                   tile.head * params.o_head_stride;
  for (int col = threadIdx.x * kColumnsPerThread; col < params.head_dim; col += blockDim.x * kColumnsPerThread) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (lse != -INFINITY) {
      for (int i = 0; i < pieces; ++i) {
        float const* slot = slot_of(i);
        float weight = expf(slot[params.block_m * params.head_dim + row_in_tile] - lse);
        float4 o = *reinterpret_cast<float4 const*>(slot + row_in_tile * params.head_dim + col);
        acc.x += weight * o.x;
        acc.y += weight * o.y;
        acc.z += weight * o.z;
        acc.w += weight * o.w;
      }
    }
    Element out[kColumnsPerThread] = {Element(acc.x), Element(acc.y), Element(acc.z), Element(acc.w)};
    *reinterpret_cast<uint2*>(o_row + col) = *reinterpret_cast<uint2 const*>(out);
  }
  if (params.lse != nullptr && threadIdx.x == 0) {
    params.lse[(int64_t(tile.batch) * params.scheduler.heads + tile.head) * params.seqlen_q + position +
               head_in_group * params.lse_group_stride] = lse;
  }
}

// The split tail: CTA x merges the pieces of tail unit x >> cluster_shift's tile of rank
// x & (cluster CTAs - 1).
template <class Element>
__global__ void split_tail_combine_kernel(SplitCombineParams const params) {
  SplitTail const& split = params.scheduler.split;
  int const shift = split.cluster_shift;
  int const workers = params.ctas >> shift;
  int const unit = blockIdx.x >> shift, rank = blockIdx.x - (unit << shift);
  TileCoord const tile = params.scheduler.tile(split.unit_tile(params.ctas, unit, rank));
  int const row_in_tile = blockIdx.y * kRowsPerCta + threadIdx.y;
  if (tile.m_block * params.block_m + row_in_tile >= params.seqlen_q) return;

  // The workers whose runs cover some of this unit's blocks, each with one piece of it.
  int const unit_begin = unit * split.n_blocks, unit_end = unit_begin + split.n_blocks;
  int first_worker = 0;
  while (split.run_begin(first_worker + 1) <= unit_begin) ++first_worker;
  int end_worker = first_worker;
  while (end_worker < workers && split.run_begin(end_worker) < unit_end) ++end_worker;
  int64_t const slot_floats = params.block_m * (params.head_dim + 1);
  merge_row<Element>(params, tile, row_in_tile, end_worker - first_worker, [&](int i) {
    int worker = first_worker + i;
    int piece = unit - int(split.by_n_blocks.div(unsigned(split.run_begin(worker))));
    return params.workspace + SplitTail::piece_slot((worker << shift) + rank, piece) * slot_floats;
  });
}

// Split-KV: CTA x merges the pieces of tile x, in slots x * splits + piece (fixed) or
// those of the runs that cover it (runs). Launched as a programmatic dependent of the
// forward kernel: its CTAs start while the forward's last CTAs finish and wait here until
// the pieces are written.
template <class Element>
__global__ void split_kv_combine_kernel(SplitCombineParams const params) {
  wait_for_prerequisite();
  TileCoord const tile = params.scheduler.tile(blockIdx.x);
  int const row_in_tile = blockIdx.y * kRowsPerCta + threadIdx.y;
  if (tile.m_block * params.block_m + row_in_tile >= params.seqlen_q) return;
  SplitKv const& split = params.split_kv;
  int64_t const slot_floats = params.block_m * (params.head_dim + 1);
  if (split.workers > 0) {
    int const first = split.first_worker(blockIdx.x);
    merge_row<Element>(params, tile, row_in_tile, split.end_worker(blockIdx.x) - first, [&](int i) {
      return params.workspace + int64_t(split.piece_index(first + i, blockIdx.x)) * slot_floats;
    });
    return;
  }
  merge_row<Element>(params, tile, row_in_tile, split.splits, [&](int i) {
    return params.workspace + (int64_t(blockIdx.x) * split.splits + i) * slot_floats;
  });
}

}  // namespace

template <class Element>
Status launch_split_combine(SplitCombineParams const& params, cudaStream_t stream) {
  dim3 block(unsigned(params.head_dim / kColumnsPerThread), unsigned(kRowsPerCta));
  if (params.split_kv.active()) {
    // Only the rows a tile holds (decode: a handful of a 128-row tile).
    int rows = params.seqlen_q < params.block_m ? params.seqlen_q : params.block_m;
    // Decode's merge is a few microseconds: its launch overlaps the forward's tail.
    DependentLaunch launch(dim3(params.scheduler.num_tiles(), unsigned((rows + kRowsPerCta - 1) / kRowsPerCta)), block,
                           0, stream);
    return check_cuda(cudaLaunchKernelEx(&launch.config, split_kv_combine_kernel<Element>, params),
                      "split_kv_combine_kernel launch");
  }
  SplitTail const& split = params.scheduler.split;
  dim3 grid(unsigned(split.units << split.cluster_shift), unsigned(params.block_m / kRowsPerCta));
  split_tail_combine_kernel<Element><<<grid, block, 0, stream>>>(params);
  return check_cuda(cudaGetLastError(), "split_tail_combine_kernel launch");
}

template Status launch_split_combine<cutlass::bfloat16_t>(SplitCombineParams const&, cudaStream_t);
template Status launch_split_combine<cutlass::half_t>(SplitCombineParams const&, cudaStream_t);

}  // namespace warpflash::kernels
