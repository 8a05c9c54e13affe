// The backward's preprocess and postprocess kernels (kernels/backward/prepost.h) against
// the CPU: dPsum = rowsum(dO * O) in double precision, LSE in base 2 (+inf past a sequence
// and for rows that saw no key), cleared dQ accumulator tiles and semaphores; and dQ =
// scale * accumulator rounded as the host rounds it, written only in the sequences' rows.
// Packed batches with empty sequences and lengths around the tile size, and dense ones.
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype_bits.h"
#include "common/head_dims.h"
#include "common/hopper_gpu.h"
#include "kernels/backward/dq_order.h"
#include "kernels/backward/prepost.h"
#include "warpflash/warpflash.h"

namespace warpflash {
namespace {

using testing::DeviceBuffer;
using testing::from_bits;
using testing::head_dims_name;
using testing::kPoison;
using testing::kTestHeadDims;
using testing::to_bits;

struct PrepostCase {
  const char* name;
  bool packed;
  std::vector<int> lengths;  // dense: batch sequences of lengths[0]
};

const PrepostCase kPrepostCases[] = {
    {"packed", true, {0, 1, 63, 64, 65, 200, 0, 129}},
    {"dense", false, {100, 100, 100}},
};

using Param = std::tuple<DType, HeadDims, PrepostCase>;
class BackwardPrepostGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(BackwardPrepostGpuTest, MatchesTheCpu) {
  WARPFLASH_REQUIRE_HOPPER();
  auto [dtype, dims, c] = GetParam();
  const int heads = 3, d = dims.qk, dv = dims.v;
  const int batch = static_cast<int>(c.lengths.size());
  std::vector<int> cu(1, 0);
  for (int n : c.lengths) cu.push_back(cu.back() + n);
  const int total = cu.back(), longest = *std::max_element(c.lengths.begin(), c.lengths.end());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random_bits = [&](size_t count) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& b : bits) b = to_bits(dtype, normal(rng));
    return bits;
  };
  std::vector<uint16_t> o = random_bits(size_t(total) * heads * dv), d_o = random_bits(o.size());
  std::vector<float> lse(size_t(total) * heads);
  for (size_t i = 0; i < lse.size(); ++i) lse[i] = i % 17 == 0 ? -INFINITY : 3.f * normal(rng);
  DeviceBuffer<uint16_t> o_dev(o.size()), d_o_dev(o.size()), d_q_dev(size_t(total) * heads * d);
  DeviceBuffer<float> lse_dev(lse.size());
  DeviceBuffer<int> cu_dev(cu.size());
  ASSERT_TRUE(o_dev.upload(o) && d_o_dev.upload(d_o) && lse_dev.upload(lse) && cu_dev.upload(cu) &&
              d_q_dev.upload(std::vector<uint16_t>(d_q_dev.size(), kPoison)));

  BackwardArgs args;
  ForwardArgs& f = args.forward;
  f.dtype = dtype;
  if (c.packed) {
    f.shape = {batch, longest, longest, heads, heads, d, dv};
    f.cu_seqlens_q = f.cu_seqlens_k = cu_dev.get();
    f.total_q = f.total_k = total;
  } else {
    f.shape = {batch, c.lengths[0], c.lengths[0], heads, heads, d, dv};
  }
  int64_t seqlen = f.shape.seqlen_q;  // per batch entry of a dense view; packed: one batch of total rows
  f.o = contiguous_view(o_dev.get(), c.packed ? total : seqlen, heads, dv);
  f.lse = lse_dev.get();
  args.d_o = contiguous_view(d_o_dev.get(), c.packed ? total : seqlen, heads, dv);
  args.d_q = contiguous_view(d_q_dev.get(), c.packed ? total : seqlen, heads, d);
  kernels::BackwardWorkspace w = kernels::backward_workspace(args);
  DeviceBuffer<uint8_t> workspace(w.bytes);
  WARPFLASH_CUDA_OK(cudaMemset(workspace.get(), 0xff, w.bytes));  // NaN floats, -1 semaphores
  args.workspace = workspace.get();
  args.workspace_bytes = w.bytes;
  const float scale = 0.125f;
  kernels::BackwardPrepostParams params = kernels::backward_prepost_params(args, scale);
  Status status = kernels::launch_backward_preprocess(dtype, params, nullptr);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> bytes = workspace.download();
  auto floats_at = [&](size_t offset) { return reinterpret_cast<const float*>(bytes.data() + offset); };
  const float* dpsum = floats_at(w.dpsum);
  const float* lse_log2 = floats_at(w.lse_log2);
  const float* accumulator = floats_at(w.dq_accum);
  const int* semaphore = reinterpret_cast<const int*>(bytes.data() + w.dq_semaphore);
  kernels::SequenceLengths seq{c.packed ? cu.data() : nullptr, nullptr, static_cast<int>(seqlen), total};

  int bad = 0;
  for (int b = 0; b < batch; ++b) {
    int length = c.lengths[b], tile_rows = static_cast<int>(kernels::BackwardWorkspace::round_up(length, w.block_m));
    int64_t first = w.first_row(seq, b);
    for (int h = 0; h < heads; ++h) {
      for (int r = 0; r < tile_rows; ++r) {
        int64_t at = int64_t(h) * w.padded_rows + first + r;
        double want_sum = 0, want_lse = INFINITY;
        if (r < length) {
          int64_t token = (c.packed ? cu[b] : int64_t(b) * seqlen) + r;
          for (int k = 0; k < dv; ++k) {
            size_t i = (size_t(token) * heads + h) * dv + k;
            want_sum += double(from_bits(dtype, o[i])) * from_bits(dtype, d_o[i]);
          }
          float l = lse[c.packed ? size_t(h) * total + token : (size_t(b) * heads + h) * seqlen + r];
          want_lse = l == -INFINITY ? INFINITY : double(l) * M_LOG2E;
        }
        bool sum_ok = std::fabs(dpsum[at] - want_sum) <= 1e-4 * (1 + std::fabs(want_sum));
        bool lse_ok = std::isinf(want_lse) ? (std::isinf(lse_log2[at]) && lse_log2[at] > 0)
                                           : std::fabs(lse_log2[at] - want_lse) <= 1e-6 * (1 + std::fabs(want_lse));
        if ((!sum_ok || !lse_ok) && bad++ < 5) {
          ADD_FAILURE() << "sequence " << b << " head " << h << " row " << r << ": dpsum " << dpsum[at] << " (want "
                        << want_sum << "), lse_log2 " << lse_log2[at] << " (want " << want_lse << ")";
        }
        for (int k = 0; k < d; ++k) {
          if (accumulator[at * d + k] != 0.f && bad++ < 5) ADD_FAILURE() << "accumulator not cleared at row " << at;
        }
        if (r % w.block_m == 0 && semaphore[at / w.block_m] != 0 && bad++ < 5) ADD_FAILURE() << "semaphore " << at;
      }
    }
  }

  // The postprocess on known accumulator values: dQ = scale * value, rounded once. Each
  // tile's values are in the main kernel's fragment order (dq_order.h): where_in_tile
  // gives the float of each (row, column).
  std::vector<float> values(size_t(w.padded_rows) * heads * d);
  for (float& v : values) v = normal(rng);
  kernels::BackwardDqOrder order = kernels::BackwardDqOrder::of(d);
  std::vector<int> where_in_tile(size_t(w.block_m) * d);
  for (int vector = 0; vector < w.block_m * d / 4; ++vector) {
    for (int k = 0; k < 4; ++k) {
      int row = 0, column = 0;
      order.element(vector, k, row, column);
      where_in_tile[size_t(row) * d + column] = 4 * vector + k;
    }
  }
  WARPFLASH_CUDA_OK(cudaMemcpy(workspace.get() + w.dq_accum, values.data(), values.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  status = kernels::launch_backward_postprocess_dq(dtype, params, nullptr);
  ASSERT_TRUE(status.ok()) << status.message();
  WARPFLASH_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> d_q = d_q_dev.download();
  std::vector<bool> written(d_q.size(), false);
  for (int b = 0; b < batch; ++b) {
    int64_t first = w.first_row(seq, b);
    for (int h = 0; h < heads; ++h) {
      for (int r = 0; r < c.lengths[b]; ++r) {
        int64_t token = (c.packed ? cu[b] : int64_t(b) * seqlen) + r;
        for (int k = 0; k < d; ++k) {
          size_t i = (size_t(token) * heads + h) * d + k;
          written[i] = true;
          int64_t tile_row = int64_t(h) * w.padded_rows + first + r / w.block_m * w.block_m;
          uint16_t want = to_bits(dtype, values[size_t(tile_row) * d + where_in_tile[size_t(r % w.block_m) * d + k]] * scale);
          if (d_q[i] != want && bad++ < 5) ADD_FAILURE() << "dQ of sequence " << b << " head " << h << " row " << r;
        }
      }
    }
  }
  for (size_t i = 0; i < d_q.size(); ++i) {
    if (!written[i]) ASSERT_EQ(d_q[i], kPoison) << "dQ written outside the sequences at " << i;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  auto [dtype, dims, c] = info.param;
  std::ostringstream name;
  name << (dtype == DType::kBFloat16 ? "bf16" : "fp16") << "_" << head_dims_name(dims) << "_" << c.name;
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Prepost, BackwardPrepostGpuTest,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::ValuesIn(kTestHeadDims), ::testing::ValuesIn(kPrepostCases)),
                         param_name);

}  // namespace
}  // namespace warpflash
