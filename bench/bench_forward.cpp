// warpflash_bench: TFLOP/s of warpflash::forward on the FlashAttention-3 paper's grid
// (16k tokens, hidden 2048, head dim 64/128/256, causal or not, BF16/FP16). Each
// (dtype, head dim, causal) group is first checked against the CPU reference on small
// problems; each timed output is checked to be finite. Exits non-zero on any failure.
//
//   warpflash_bench [--csv PATH] [--dtypes bf16,fp16] [--head-dims 64,128,256]
//                   [--seqlens 512,1024,...] [--causal both|0|1] [--iters N] [--warmup N]
//                   [--no-workspace] [--window-left N] [--softcap X]

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "forward_options.h"
#include "reference/attention_reference.h"
#include "warpflash/warpflash.h"

namespace warpflash::bench {
namespace {

// The paper's workload: batch * seqlen = 16k tokens, heads * head_dim = 2048.
constexpr int64_t kTokens = 16384;
constexpr int64_t kHidden = 2048;
// Small problems of the spot check: one square, one with seqlen_q != seqlen_k whose
// lengths are not multiples of any tile size (bottom-right causal alignment, ragged ends).
struct SmallProblem {
  int64_t batch, seqlen_q, seqlen_k, heads;
};
constexpr SmallProblem kSpotChecks[] = {{1, 256, 256, 2}, {2, 200, 333, 2}};
constexpr double kMaxRelativeL2 = 2e-2;
constexpr double kMaxLseError = 1e-3;

bool contains(const std::vector<int>& list, int x) {
  for (int y : list) if (y == x) return true;
  return false;
}

// Batch for a sequence length: 16k tokens in total, at least one sequence.
int64_t batch_for(int seqlen) { return std::max<int64_t>(1, kTokens / seqlen); }

ForwardArgs make_args(DType dtype, const AttentionShape& s, bool causal, const DeviceBuffer& q,
                      const DeviceBuffer& k, const DeviceBuffer& v, const DeviceBuffer& o,
                      const DeviceBuffer& lse, int window_left = -1, float softcap = 0.f) {
  ForwardArgs args;
  args.dtype = dtype;
  args.shape = s;
  args.q = contiguous_view(q.get(), s.seqlen_q, s.heads_q, s.head_dim);
  args.k = contiguous_view(k.get(), s.seqlen_k, s.heads_kv, s.head_dim);
  args.v = contiguous_view(v.get(), s.seqlen_k, s.heads_kv, s.head_dim);
  args.o = contiguous_view(o.get(), s.seqlen_q, s.heads_q, s.head_dim);
  args.lse = static_cast<float*>(lse.get());
  args.causal = causal;
  args.window_left = window_left;
  args.softcap = softcap;
  return args;
}

// The scores the mask leaves visible in one head of one sequence.
double visible_scores(const reference::Problem& p) {
  double total = 0;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    auto range = reference::visible_range(p, i);
    total += double(std::max<int64_t>(0, range.second - range.first));
  }
  return total;
}

// Runs one small problem on the GPU and the CPU reference and compares O and LSE.
bool spot_check(DType dtype, int head_dim, bool causal, const SmallProblem& small, const Options& opt,
                std::mt19937_64& rng) {
  reference::Problem p;
  p.batch = small.batch;
  p.seqlen_q = small.seqlen_q;
  p.seqlen_k = small.seqlen_k;
  p.heads_q = p.heads_kv = small.heads;
  p.head_dim = head_dim;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  p.causal = causal;
  p.window_left = opt.window_left < 0 ? -1 : std::min(opt.window_left, 100);
  p.softcap = opt.softcap;

  std::vector<uint16_t> q(p.q_elements()), k(p.kv_elements()), v(p.kv_elements());
  fill_normal(rng, dtype, q);
  fill_normal(rng, dtype, k);
  fill_normal(rng, dtype, v);
  const size_t elem = sizeof(uint16_t);
  DeviceBuffer dq(q.size() * elem), dk(k.size() * elem), dv(v.size() * elem);
  DeviceBuffer d_o(q.size() * elem), dlse(p.lse_elements() * sizeof(float));
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  d_o.poison();
  dlse.poison();

  const AttentionShape shape{p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim};
  if (!report_status(forward(make_args(dtype, shape, causal, dq, dk, dv, d_o, dlse, int(p.window_left), opt.softcap)),
                     "forward (spot check)")) {
    return false;
  }
  WF_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> o(q.size());
  std::vector<float> lse(p.lse_elements());
  d_o.download(o);
  dlse.download(lse);

  // The reference sees exactly the rounded inputs the GPU sees.
  std::vector<double> o_ref(p.q_elements()), lse_ref(p.lse_elements());
  reference::forward(p, to_doubles(dtype, q), to_doubles(dtype, k), to_doubles(dtype, v), o_ref,
                     lse_ref);
  const double o_err = relative_l2_error(to_doubles(dtype, o), o_ref);
  const double lse_err = max_abs_error(lse, lse_ref);
  const bool ok = o_err < kMaxRelativeL2 && lse_err < kMaxLseError;
  std::printf("  check b=%lld sq=%lld sk=%lld h=%lld: O rel L2 %.2e, LSE max err %.2e%s\n",
              static_cast<long long>(p.batch), static_cast<long long>(p.seqlen_q),
              static_cast<long long>(p.seqlen_k), static_cast<long long>(p.heads_q), o_err,
              lse_err, ok ? "" : "  FAILED");
  return ok;
}

// Times `iters` launches, each between its own pair of events; the queue runs ahead of the
// GPU (no synchronization until the end), so host launch overhead stays out of the numbers.
template <class Call>
bool time_calls(Call call, const Options& opt, Timing& timing, cudaStream_t stream) {
  for (int i = 0; i < opt.warmup; ++i) {
    if (!report_status(call(), "warm-up")) return false;
  }
  std::vector<cudaEvent_t> start(opt.iters), stop(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    WF_CUDA_CHECK(cudaEventCreate(&start[i]));
    WF_CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  bool ok = true;
  for (int i = 0; i < opt.iters && ok; ++i) {
    WF_CUDA_CHECK(cudaEventRecord(start[i], stream));
    ok = report_status(call(), "timed call");
    WF_CUDA_CHECK(cudaEventRecord(stop[i], stream));
  }
  WF_CUDA_CHECK(cudaEventSynchronize(stop[opt.iters - 1]));
  std::vector<float> ms(opt.iters);
  for (int i = 0; i < opt.iters; ++i) {
    if (ok) WF_CUDA_CHECK(cudaEventElapsedTime(&ms[i], start[i], stop[i]));
    WF_CUDA_CHECK(cudaEventDestroy(start[i]));
    WF_CUDA_CHECK(cudaEventDestroy(stop[i]));
  }
  if (ok) timing = summarize(ms);
  return ok;
}

// Tensors of the full-size problem, shared by every configuration: Q, K, V, O have
// tokens * hidden elements whatever the head dim; LSE is sized for the most heads.
struct BigProblem {
  BigProblem(int64_t tokens, int64_t max_heads, bool backward)
      : elements(tokens * kHidden),
        q(elements * sizeof(uint16_t)), k(elements * sizeof(uint16_t)),
        v(elements * sizeof(uint16_t)), o(elements * sizeof(uint16_t)),
        lse(tokens * max_heads * sizeof(float)) {
    if (backward) {
      for (auto* buffer : {&d_o, &d_q, &d_k, &d_v}) *buffer = std::make_unique<DeviceBuffer>(elements * sizeof(uint16_t));
    }
  }

  void fill(DType dtype, std::mt19937_64& rng) {
    std::vector<uint16_t> host(elements);
    for (DeviceBuffer* buffer : {&q, &k, &v, d_o.get()}) {
      if (buffer == nullptr) continue;
      fill_normal(rng, dtype, host);
      buffer->upload(host);
    }
  }

  // Gives args the workspace forward() asks for (grown as needed).
  void attach_workspace(ForwardArgs& args) {
    size_t bytes = forward_workspace_bytes(args);
    if (bytes == 0) return;
    args.workspace = grown(workspace, bytes);
    args.workspace_bytes = bytes;
  }

  // The backward of forward_args's problem on dO, dQ, dK, dV (only with --backward), with
  // its workspace.
  BackwardArgs backward_args(const ForwardArgs& forward_args) {
    BackwardArgs args;
    args.forward = forward_args;
    const AttentionShape& s = forward_args.shape;
    args.d_o = contiguous_view(d_o->get(), s.seqlen_q, s.heads_q, s.head_dim);
    args.d_q = contiguous_view(d_q->get(), s.seqlen_q, s.heads_q, s.head_dim);
    args.d_k = contiguous_view(d_k->get(), s.seqlen_k, s.heads_kv, s.head_dim);
    args.d_v = contiguous_view(d_v->get(), s.seqlen_k, s.heads_kv, s.head_dim);
    args.workspace_bytes = backward_workspace_bytes(args);
    args.workspace = grown(backward_workspace, args.workspace_bytes);
    return args;
  }

  // buffer's memory, reallocated first when it holds fewer than `bytes`.
  static void* grown(std::unique_ptr<DeviceBuffer>& buffer, size_t bytes) {
    if (!buffer || buffer->bytes() < bytes) {
      buffer.reset();
      buffer = std::make_unique<DeviceBuffer>(bytes);
    }
    return buffer->get();
  }

  int64_t elements;
  DeviceBuffer q, k, v, o, lse;
  std::unique_ptr<DeviceBuffer> d_o, d_q, d_k, d_v;
  std::unique_ptr<DeviceBuffer> workspace, backward_workspace;
  std::vector<uint16_t> o_host;  // reused by count_non_finite
  std::vector<float> lse_host;
};

// Counts the non-finite elements of the output and LSE of the last run of `shape` (and of
// dQ, dK, dV with --backward).
int64_t count_non_finite(BigProblem& big, DType dtype, const AttentionShape& s) {
  big.o_host.resize(s.batch * s.seqlen_q * s.heads_q * s.head_dim);
  big.lse_host.resize(s.batch * s.heads_q * s.seqlen_q);
  big.lse.download(big.lse_host);
  int64_t bad = 0;
  for (const DeviceBuffer* buffer : {&big.o, big.d_q.get(), big.d_k.get(), big.d_v.get()}) {
    if (buffer == nullptr) continue;
    buffer->download(big.o_host);  // K and V have as many elements as Q here (no GQA)
    for (uint16_t x : big.o_host) bad += !is_finite_bits(dtype, x);
  }
  for (float x : big.lse_host) bad += !std::isfinite(x);
  return bad;
}

// Host cost of one call: back-to-back calls on one stream, then one synchronize. For a
// problem this small the GPU finishes each kernel before the next call is issued.
int run_latency(const Options& opt) {
  const AttentionShape s{1, 128, 128, 8, 8, 128};
  const size_t elements = s.batch * s.seqlen_q * s.heads_q * s.head_dim;
  std::mt19937_64 rng(7);
  std::vector<uint16_t> host(elements);
  fill_normal(rng, DType::kBFloat16, host);
  DeviceBuffer q(elements * 2), k(elements * 2), v(elements * 2), o(elements * 2), lse(s.heads_q * s.seqlen_q * 4);
  q.upload(host);
  k.upload(host);
  v.upload(host);
  ForwardArgs args = make_args(DType::kBFloat16, s, false, q, k, v, o, lse);
  const int calls = std::max(opt.iters, 1000);
  for (int i = 0; i < opt.warmup + 100; ++i) {
    if (!report_status(forward(args), "forward")) return EXIT_FAILURE;
  }
  WF_CUDA_CHECK(cudaDeviceSynchronize());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    if (!report_status(forward(args), "forward")) return EXIT_FAILURE;
  }
  WF_CUDA_CHECK(cudaDeviceSynchronize());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("latency_us_per_call %.3f\n", seconds * 1e6 / calls);
  return EXIT_SUCCESS;
}

int run(const Options& opt) {
  int device = 0;
  cudaDeviceProp prop;
  WF_CUDA_CHECK(cudaGetDevice(&device));
  WF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("device %d: %s (sm_%d%d), %d SMs\n", device, prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);

  FILE* csv = nullptr;
  if (!opt.csv_path.empty()) {
    csv = std::fopen(opt.csv_path.c_str(), "w");
    if (!csv) {
      std::fprintf(stderr, "error: cannot write %s: %s\n", opt.csv_path.c_str(),
                   std::strerror(errno));
      return EXIT_FAILURE;
    }
    std::fprintf(csv, "dtype,head_dim,causal,seqlen,batch,heads,ms_median,ms_min,tflops\n");
  }

  int64_t tokens = 0;
  for (int seqlen : opt.seqlens) tokens = std::max(tokens, batch_for(seqlen) * seqlen);
  const int min_head_dim = *std::min_element(opt.head_dims.begin(), opt.head_dims.end());
  BigProblem big(tokens, kHidden / min_head_dim, opt.backward);
  std::mt19937_64 rng(2407);
  int failures = 0;

  std::printf("%-5s %5s %6s %7s %6s %6s %10s %10s %8s\n", "dtype", "hdim", "causal", "seqlen",
              "batch", "heads", "ms_median", "ms_min", "TFLOP/s");
  for (DType dtype : opt.dtypes) {
    const std::vector<int> compiled = compiled_head_dims(dtype);
    big.fill(dtype, rng);
    for (int head_dim : opt.head_dims) {
      if (!contains(compiled, head_dim)) {
        std::printf("note: %s head_dim %d is not compiled in this build; skipped\n",
                    short_name(dtype), head_dim);
        continue;
      }
      for (bool causal : opt.causal) {
        bool checked = true;
        for (const SmallProblem& small : kSpotChecks) {
          checked = spot_check(dtype, head_dim, causal, small, opt, rng) && checked;
        }
        if (!checked) {
          std::printf("  %s d=%d causal=%d fails the spot check; not timed\n", short_name(dtype),
                      head_dim, causal);
          ++failures;
          continue;
        }
        for (int seqlen : opt.seqlens) {
          const int64_t batch = batch_for(seqlen), heads = kHidden / head_dim;
          const AttentionShape shape{batch, seqlen, seqlen, heads, heads, head_dim};
          for (DeviceBuffer* buffer : {&big.o, &big.lse, big.d_q.get(), big.d_k.get(), big.d_v.get()}) {
            if (buffer != nullptr) buffer->poison();
          }
          Timing t;
          ForwardArgs args = make_args(dtype, shape, causal, big.q, big.k, big.v, big.o, big.lse, opt.window_left,
                                       opt.softcap);
          if (opt.workspace) big.attach_workspace(args);
          bool timed = false;
          if (opt.backward) {
            BackwardArgs backward_args = big.backward_args(args);
            backward_args.deterministic = opt.deterministic;
            timed = report_status(forward(args), "forward (before the backward)") &&
                    time_calls([&] { return backward(backward_args); }, opt, t, args.stream);
          } else {
            timed = time_calls([&] { return forward(args); }, opt, t, args.stream);
          }
          if (!timed) {
            std::printf("  %s d=%d causal=%d seqlen=%d: %s failed\n", short_name(dtype), head_dim, causal,
                        seqlen, opt.backward ? "backward" : "forward");
            ++failures;
            continue;
          }
          if (const int64_t bad = count_non_finite(big, dtype, shape)) {
            std::printf("  %s d=%d causal=%d seqlen=%d: %lld non-finite or unwritten outputs\n",
                        short_name(dtype), head_dim, causal, seqlen, static_cast<long long>(bad));
            ++failures;
            continue;
          }
          reference::Problem head;  // one head of one sequence, for the visible scores
          head.seqlen_q = head.seqlen_k = seqlen;
          head.causal = causal;
          head.window_left = opt.window_left;
          const double scores = opt.window_left < 0 ? double(seqlen) * seqlen / (causal ? 2.0 : 1.0)
                                                    : visible_scores(head);
          const double flops = (opt.backward ? 2.5 : 1.0) * 4.0 * batch * heads * scores * head_dim;
          const double tflops = flops / (t.median_ms * 1e-3) / 1e12;
          std::printf("%-5s %5d %6d %7d %6lld %6lld %10.4f %10.4f %8.1f\n", short_name(dtype),
                      head_dim, causal, seqlen, static_cast<long long>(batch),
                      static_cast<long long>(heads), t.median_ms, t.min_ms, tflops);
          std::fflush(stdout);
          if (csv) {
            std::fprintf(csv, "%s,%d,%d,%d,%lld,%lld,%.6f,%.6f,%.3f\n", short_name(dtype),
                         head_dim, causal, seqlen, static_cast<long long>(batch),
                         static_cast<long long>(heads), t.median_ms, t.min_ms, tflops);
            std::fflush(csv);
          }
        }
      }
    }
  }
  if (csv && std::fclose(csv) != 0) {
    std::fprintf(stderr, "error: writing %s failed\n", opt.csv_path.c_str());
    ++failures;
  }
  if (failures) std::fprintf(stderr, "%d failure(s); see the messages above\n", failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

}  // namespace
}  // namespace warpflash::bench

int main(int argc, char** argv) {
  warpflash::bench::Options opt;
  bool help = false;
  if (!warpflash::bench::parse_options(argc, argv, opt, help)) return EXIT_FAILURE;
  if (help) {
    warpflash::bench::print_usage();
    return EXIT_SUCCESS;
  }
  return opt.latency ? warpflash::bench::run_latency(opt) : warpflash::bench::run(opt);
}
