// CPU reference attention in double precision: the ground truth for every GPU test.
// Tensors here are dense and contiguous: Q, dQ are (batch, seqlen_q, heads_q, head_dim),
// O, dO the same with head_dim_v; K, dK are (batch, seqlen_k, heads_kv, head_dim), V, dV
// the same with head_dim_v; LSE is
// (batch, heads_q, seqlen_q), natural log. Conventions as in include/warpflash/forward.h:
// GQA maps Q head h to KV head h / (heads_q / heads_kv); the causal mask is aligned to the
// bottom-right corner (query i sees key j when j <= i + seqlen_k - seqlen_q); a row that
// sees no key gets O = 0 and LSE = -inf. Inputs of the wrong size, or heads_q not a multiple
// of heads_kv, throw std::invalid_argument.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace warpflash::reference {

struct Problem {
  int64_t batch = 1;
  int64_t seqlen_q = 1;
  int64_t seqlen_k = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t head_dim = 1;
  double softmax_scale = 1.0;  // taken as given: set 1/sqrt(head_dim) to match the API's default
  bool causal = false;
  // Sliding window (FlashAttention's window_size): query i sees key j when
  // i + d - window_left <= j <= i + d + window_right, d = seqlen_k - seqlen_q; -1 is
  // unbounded; causal sets window_right = 0.
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Chunked attention: > 0 limits query i to keys j with floor(j / c) == floor((i + d) / c).
  int64_t attention_chunk = 0;
  // Softcap: > 0 replaces each scaled score s by softcap * tanh(s / softcap).
  double softcap = 0.0;
  // Learnable sinks: one logit per query head in every row's denominator; empty: none.
  std::vector<double> sinks;
  // Head dim of V and O; 0: head_dim (the forward only).
  int64_t head_dim_v = 0;

  int64_t value_head_dim() const { return head_dim_v != 0 ? head_dim_v : head_dim; }
  int64_t q_elements() const { return batch * seqlen_q * heads_q * head_dim; }
  int64_t kv_elements() const { return batch * seqlen_k * heads_kv * head_dim; }
  int64_t v_elements() const { return batch * seqlen_k * heads_kv * value_head_dim(); }
  int64_t o_elements() const { return batch * seqlen_q * heads_q * value_head_dim(); }
  int64_t lse_elements() const { return batch * heads_q * seqlen_q; }
};

// True when query row `i` may attend to key `j` under the problem's mask.
bool is_visible(const Problem& p, int64_t i, int64_t j);

// The keys [first, second) query row `i` sees (empty when second <= first).
std::pair<int64_t, int64_t> visible_range(const Problem& p, int64_t i);

// Forward in double precision. o has q_elements(), lse has lse_elements().
void forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
             const std::vector<double>& v, std::vector<double>& o, std::vector<double>& lse);

// Backward in double precision: dQ (q_elements), dK (kv_elements), dV (v_elements) from dO
// (o_elements), recomputing the forward; every mask and option of the forward (softcap,
// sinks, head_dim_v). With d_sinks, also the gradient of each query head's sink logit
// (heads_q values; zeros without sinks).
void backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& d_o,
              std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv,
              std::vector<double>* d_sinks = nullptr);

// Rounding of a value to a 16-bit input type, for emulating low-precision attention.
enum class Precision { kFloat16, kBFloat16 };
float round_to(Precision precision, float x);

// Attention the way PyTorch computes it in a 16-bit input precision (keeping S in fp32, as
// the kernels do, which is slightly tighter than PyTorch's bf16 S): S = Q K^T in fp32,
// softmax in fp32, P rounded to the input type, O = P V accumulated in fp32 and rounded
// to the input type. Its error against forward() sets the tolerance of the GPU tests
// (FlashAttention's criterion: the kernel's error within 2x of this one's).
void forward_low_precision(const Problem& p, Precision precision, const std::vector<double>& q,
                           const std::vector<double>& k, const std::vector<double>& v,
                           std::vector<double>& o);

// The backward as the kernels compute it in a 16-bit input precision: fp32 GEMMs and
// softmax, P and dS rounded to the input type before the GEMMs that read them, dQ, dK
// and dV rounded to it at the end. Its error against backward() sets the tolerance of
// the backward's GPU tests, as forward_low_precision() does for the forward.
void backward_low_precision(const Problem& p, Precision precision, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            const std::vector<double>& d_o, std::vector<double>& dq, std::vector<double>& dk,
                            std::vector<double>& dv);

}  // namespace warpflash::reference
