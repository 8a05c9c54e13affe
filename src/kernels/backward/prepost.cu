// The backward's preprocess and postprocess kernels (prepost.h): memory-bound, one CTA per
// (query tile of the main kernel, head, batch), 16-byte loads and row-predicated stores.
#include "kernels/backward/prepost.h"

#include <cmath>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention/check_cuda.h"
#include "kernels/attention/dependent_launch.h"
#include "kernels/backward/dq_order.h"

namespace warpflash::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class Element>
__device__ __forceinline__ Element from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }

// The first element of (batch, token, head) in a view; T is const for the inputs.
template <class T>
__device__ __forceinline__ T* row_of(TensorView4d const& view, int batch, int64_t token, int head) {
  return static_cast<T*>(view.data) + batch * view.batch_stride + token * view.seqlen_stride + head * view.head_stride;
}

// The tile's rows [row_begin, row_begin + block_m) of its sequence, or false when the tile
// lies past the sequence's last (partial) tile.
struct TileRows {
  SequenceLengths::Sequence seq;
  int row_begin;
  int64_t first;  // the workspace row of row_begin
};
__device__ __forceinline__ bool tile_rows(BackwardPrepostParams const& p, TileRows& rows) {
  int block_m = p.workspace.block_m;
  rows.seq = p.seq_q.of(blockIdx.z);
  rows.row_begin = blockIdx.x * block_m;
  if (rows.row_begin >= BackwardWorkspace::round_up(rows.seq.length, block_m)) return false;
  rows.first = p.workspace.first_row(p.seq_q, blockIdx.z) + rows.row_begin;
  return true;
}

// Loads in flight: each thread issues up to this many 16-byte loads of each input before
// it uses any of them; otherwise these kernels wait on one load's latency after another (a
// row a warp at a time cost the whole backward about a tenth at d = 64, 1k: docs/perf-notes.md).
// One round covers a whole tile at every head dim: at most 2048 chunks of 8 columns
// (64 x 256) for the preprocess, 4096 of 4 for the postprocess, over 256 threads.
constexpr int kPreprocessLoads = 8;
constexpr int kPostprocessLoads = 16;

// The postprocess's row pitch in 16-bit elements: 8 more than the head dim, so that the
// rows a warp's scattered stores reach lie 4 banks apart (head dims are multiples of 32).
__host__ __device__ constexpr int dq_tile_pitch(int head_dim) { return head_dim + 8; }

// dPsum = rowsum(dO * O) (0 past the sequence), LSE * log2(e) (+inf past the sequence and
// for rows that saw no key, so that the main kernel's P = exp2(S - LSE_log2) is 0 there),
// and the tile's rows of the dQ accumulator and its semaphore cleared. The tile's rows are
// cut into chunks of 8 columns, consecutive chunks to consecutive threads (coalesced); each
// chunk's dot product goes to shared memory and one thread a row adds them in a fixed order
// (bitwise the same every run, for the deterministic mode).
template <class Element>
__global__ void __launch_bounds__(kThreads) backward_preprocess_kernel(BackwardPrepostParams const p) {
  extern __shared__ float chunk_sums[];  // (block_m, chunks + 1): the odd row pitch spreads a warp's reads over the banks
  TileRows rows;
  if (!tile_rows(p, rows)) return;
  int head = blockIdx.y, batch_coord = p.seq_q.batch_coord(blockIdx.z);
  BackwardWorkspace const& w = p.workspace;
  int64_t head_row = int64_t(head) * w.padded_rows + rows.first;
  float4* accumulator = reinterpret_cast<float4*>(reinterpret_cast<float*>(p.workspace_base + w.dq_accum) +
                                                  head_row * w.head_dim);
  for (int i = threadIdx.x; i < w.block_m * w.head_dim / 4; i += kThreads) accumulator[i] = make_float4(0, 0, 0, 0);

  // The main kernel (a programmatic dependent) may take the SMs this kernel's last CTAs free.
  allow_dependents();
  int chunks = p.head_dim_v / 8, tile_chunks = w.block_m * chunks;
  for (int first = 0; first < tile_chunks; first += kPreprocessLoads * kThreads) {
    uint4 o_bits[kPreprocessLoads], d_o_bits[kPreprocessLoads];
#pragma unroll
    for (int k = 0; k < kPreprocessLoads; ++k) {
      int i = first + k * kThreads + threadIdx.x, row = rows.row_begin + i / chunks;
      o_bits[k] = d_o_bits[k] = make_uint4(0, 0, 0, 0);  // rows past the sequence: dPsum 0
      if (i < tile_chunks && row < rows.seq.length) {
        int column = i % chunks * 8;
        o_bits[k] = *reinterpret_cast<uint4 const*>(
            row_of<Element const>(p.o, batch_coord, rows.seq.offset + row, head) + column);
        d_o_bits[k] = *reinterpret_cast<uint4 const*>(
            row_of<Element const>(p.d_o, batch_coord, rows.seq.offset + row, head) + column);
      }
    }
#pragma unroll
    for (int k = 0; k < kPreprocessLoads; ++k) {
      int i = first + k * kThreads + threadIdx.x;
      if (i >= tile_chunks) break;
      Element const* o8 = reinterpret_cast<Element const*>(&o_bits[k]);
      Element const* d_o8 = reinterpret_cast<Element const*>(&d_o_bits[k]);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += to_float(o8[j]) * to_float(d_o8[j]);
      chunk_sums[i / chunks * (chunks + 1) + i % chunks] = sum;
    }
  }
  __syncthreads();

  float* dpsum = reinterpret_cast<float*>(p.workspace_base + w.dpsum) + head_row;
  float* lse_log2 = reinterpret_cast<float*>(p.workspace_base + w.lse_log2) + head_row;
  float const* lse = p.lse + blockIdx.z * p.lse_batch_stride + head * p.lse_head_stride + rows.seq.offset;
  float sink = p.sinks != nullptr ? p.sinks[head] : 0.f, d_sink = 0.f;  // this thread's rows' share
  for (int r = threadIdx.x; r < w.block_m; r += kThreads) {
    int row = rows.row_begin + r;
    bool inside = row < rows.seq.length;
    float sum = 0.f;
    for (int c = 0; c < chunks; ++c) sum += chunk_sums[r * (chunks + 1) + c];
    float row_lse = inside ? lse[row] : -INFINITY;
    dpsum[r] = sum;
    lse_log2[r] = row_lse == -INFINITY ? INFINITY : row_lse * float(M_LOG2E);
    // The sink is a logit without a value row: its probability's gradient is -P_sink * dPsum.
    if (p.sinks != nullptr && inside) d_sink -= __expf(sink - row_lse) * sum;
  }
  if (threadIdx.x == 0) {
    int* semaphore = reinterpret_cast<int*>(p.workspace_base + w.dq_semaphore);
    semaphore[head_row / w.block_m] = 0;
  }
  if (p.sinks == nullptr) return;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) d_sink += __shfl_xor_sync(0xffffffffu, d_sink, offset);
  if (p.deterministic) {  // the warps' shares in order, one share a tile
    __shared__ float warp_shares[kWarps];
    if (lane == 0) warp_shares[warp] = d_sink;
    __syncthreads();
    if (threadIdx.x == 0) {
      float share = 0.f;
      for (int i = 0; i < kWarps; ++i) share += warp_shares[i];
      reinterpret_cast<float*>(p.workspace_base + w.sink_partials)[head_row / w.block_m] = share;
    }
  } else if (lane == 0 && d_sink != 0.f) {
    atomicAdd(p.d_sink + head, d_sink);
  }
}

// Deterministic mode: d_sink[head] = the sum of the preprocess's shares of the head's query
// tiles, sequence by sequence, in a fixed order (each lane a fixed subset, then a fixed tree).
__device__ void sum_sink_shares(BackwardPrepostParams const& p, int head) {
  BackwardWorkspace const& w = p.workspace;
  float const* shares = reinterpret_cast<float const*>(p.workspace_base + w.sink_partials);
  int lane = threadIdx.x;
  float sum = 0.f;
  for (int b = 0; b < p.batch; ++b) {
    int64_t first_tile = w.head_first_row(p.seq_q, b, head) / w.block_m;
    int64_t tiles = BackwardWorkspace::round_up(p.seq_q.of(b).length, w.block_m) / w.block_m;
    for (int64_t t = lane; t < tiles; t += 32) sum += shares[first_tile + t];
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) p.d_sink[head] = sum;
}

// dQ = softmax_scale * accumulator for the tile's rows of its sequence. The accumulator's
// tile is in the main kernel's fragment order (dq_order.h): each thread issues all of its
// 16-byte loads (consecutive vectors to consecutive threads) before it uses any, puts the
// scaled, rounded values in place in a shared-memory copy of the tile, whose rows then
// leave 16 bytes a thread.
template <class Element>
__global__ void __launch_bounds__(kThreads) backward_postprocess_dq_kernel(BackwardPrepostParams const p) {
  extern __shared__ uint4 shared_dq[];  // (block_m, dq_tile_pitch(head_dim)) Elements
  wait_for_prerequisite();  // launched as the main kernel's programmatic dependent
  if (p.sinks != nullptr && p.deterministic && blockIdx.x == 0 && blockIdx.z == 0 && threadIdx.x < 32) {
    sum_sink_shares(p, blockIdx.y);
  }
  TileRows rows;
  if (!tile_rows(p, rows)) return;
  int head = blockIdx.y, batch_coord = p.seq_q.batch_coord(blockIdx.z);
  BackwardWorkspace const& w = p.workspace;
  BackwardDqOrder const order = BackwardDqOrder::of(w.head_dim);
  Element* tile = reinterpret_cast<Element*>(shared_dq);
  int pitch = dq_tile_pitch(w.head_dim);
  float4 const* accumulator = reinterpret_cast<float4 const*>(
      reinterpret_cast<float const*>(p.workspace_base + w.dq_accum) + (int64_t(head) * w.padded_rows + rows.first) * w.head_dim);
  int vectors = w.block_m * w.head_dim / 4;
  for (int first = 0; first < vectors; first += kPostprocessLoads * kThreads) {
    float4 sums[kPostprocessLoads];
#pragma unroll
    for (int k = 0; k < kPostprocessLoads; ++k) {
      int i = first + k * kThreads + threadIdx.x;
      if (i < vectors) sums[k] = accumulator[i];
    }
#pragma unroll
    for (int k = 0; k < kPostprocessLoads; ++k) {
      int i = first + k * kThreads + threadIdx.x;
      if (i >= vectors) break;
      float const values[4] = {sums[k].x, sums[k].y, sums[k].z, sums[k].w};
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        int row = 0, column = 0;
        order.element(i, v, row, column);
        tile[row * pitch + column] = from_float<Element>(values[v] * p.softmax_scale);
      }
    }
  }
  __syncthreads();
  int chunks = w.head_dim / 8;  // of 16 bytes
  for (int i = threadIdx.x; i < w.block_m * chunks; i += kThreads) {
    int r = i / chunks, column = i % chunks * 8, row = rows.row_begin + r;
    if (row >= rows.seq.length) break;
    *reinterpret_cast<uint4*>(row_of<Element>(p.d_q, batch_coord, rows.seq.offset + row, head) + column) =
        *reinterpret_cast<uint4 const*>(tile + r * pitch + column);
  }
}

// dependent: launched as a programmatic dependent of the stream's previous kernel.
template <class Kernel>
Status launch(Kernel kernel, BackwardPrepostParams const& p, cudaStream_t stream, const char* name,
              size_t shared_bytes, bool dependent) {
  int block_m = p.workspace.block_m;
  int m_blocks = static_cast<int>(BackwardWorkspace::round_up(p.seq_q.seqlen, block_m) / block_m);
  if (m_blocks == 0 || p.batch == 0) return Status::Ok();
  dim3 grid(unsigned(m_blocks), unsigned(p.heads), unsigned(p.batch));
  if (dependent) {
    DependentLaunch launch(grid, kThreads, shared_bytes, stream);
    return check_cuda(cudaLaunchKernelEx(&launch.config, kernel, p), (std::string(name) + " launch").c_str());
  }
  kernel<<<grid, kThreads, shared_bytes, stream>>>(p);
  return check_cuda(cudaGetLastError(), (std::string(name) + " launch").c_str());
}

}  // namespace

Status launch_backward_preprocess(DType dtype, BackwardPrepostParams const& params, cudaStream_t stream) {
  size_t chunk_sums_bytes = size_t(params.workspace.block_m) * (params.head_dim_v / 8 + 1) * sizeof(float);
  if (dtype == DType::kBFloat16) {
    return launch(backward_preprocess_kernel<__nv_bfloat16>, params, stream, "backward_preprocess_kernel",
                  chunk_sums_bytes, false);
  }
  return launch(backward_preprocess_kernel<__half>, params, stream, "backward_preprocess_kernel", chunk_sums_bytes,
                false);
}

Status launch_backward_postprocess_dq(DType dtype, BackwardPrepostParams const& params, cudaStream_t stream) {
  size_t tile_bytes = size_t(params.workspace.block_m) * dq_tile_pitch(params.head_dim) * 2;  // 16-bit elements
  if (dtype == DType::kBFloat16) {
    return launch(backward_postprocess_dq_kernel<__nv_bfloat16>, params, stream, "backward_postprocess_dq_kernel",
                  tile_bytes, true);
  }
  return launch(backward_postprocess_dq_kernel<__half>, params, stream, "backward_postprocess_dq_kernel", tile_bytes,
                true);
}

}  // namespace warpflash::kernels
