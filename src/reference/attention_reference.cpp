// CPU reference attention. The arithmetic is the textbook one (full rows of scores, a
// two-pass softmax, no online rescaling); what is not textbook is only there for speed:
// a small blocked matrix product and threads over (batch, head, row or key chunk), so
// that GPU tests can afford seqlen 4097 at head_dim 256.
#include "reference/attention_reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reference/half_precision.h"

namespace warpflash::reference {
namespace {

// Rows of Q handled together: their scores (kRowBlock x seqlen_k) stay in cache.
constexpr int64_t kRowBlock = 64;
// Keys per task of the dK/dV pass.
constexpr int64_t kKeyBlock = 256;

// ---------------------------------------------------------------------------------------
// C += A * B on strided matrices. Both operands are packed into panels of 4 lanes so
// that the 4x4 accumulator tile lives in registers and vectorizes, whatever the strides
// (which is how transposes such as K^T and dS^T come for free).

template <typename T>
struct View {  // element (i, j) is data[i * row_stride + j * col_stride]
  const T* data;
  int64_t row_stride;
  int64_t col_stride;

  T at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
  View transposed() const { return {data, col_stride, row_stride}; }
};

constexpr int64_t kLanes = 4;
constexpr int64_t kGemmBlockM = 64;   // rows of A packed at once (L2)
constexpr int64_t kGemmBlockK = 256;  // depth of one packed panel (L1)

// out[p * kLanes + l] = x(lane0 + l, p0 + p), zero beyond `lanes` so tails need no branch.
template <typename T>
void pack_panel(View<T> x, int64_t lane0, int64_t lanes, int64_t p0, int64_t depth, T* out) {
  for (int64_t l = 0; l < kLanes; ++l) {
    for (int64_t p = 0; p < depth; ++p) {
      out[p * kLanes + l] = l < lanes ? x.at(lane0 + l, p0 + p) : T(0);
    }
  }
}

// c (m x n, row stride ldc) += a (m x k) * b (k x n).
template <typename T>
void gemm_acc(int64_t m, int64_t n, int64_t k, View<T> a, View<T> b, T* c, int64_t ldc) {
  std::vector<T> a_pack(kGemmBlockM * kGemmBlockK);
  std::vector<T> b_pack(kGemmBlockK * kLanes);
  for (int64_t i0 = 0; i0 < m; i0 += kGemmBlockM) {
    const int64_t rows = std::min(kGemmBlockM, m - i0);
    for (int64_t p0 = 0; p0 < k; p0 += kGemmBlockK) {
      const int64_t depth = std::min(kGemmBlockK, k - p0);
      for (int64_t i = 0; i < rows; i += kLanes) {
        pack_panel(a, i0 + i, std::min(kLanes, rows - i), p0, depth, &a_pack[i * depth]);
      }
      for (int64_t j = 0; j < n; j += kLanes) {
        const int64_t cols = std::min(kLanes, n - j);
        pack_panel(b.transposed(), j, cols, p0, depth, b_pack.data());
        for (int64_t i = 0; i < rows; i += kLanes) {
          const T* ap = &a_pack[i * depth];
          T acc[kLanes][kLanes] = {};
          for (int64_t p = 0; p < depth; ++p) {
            for (int64_t r = 0; r < kLanes; ++r) {
              for (int64_t t = 0; t < kLanes; ++t) {
                acc[r][t] += ap[p * kLanes + r] * b_pack[p * kLanes + t];
              }
            }
          }
          for (int64_t r = 0; r < std::min(kLanes, rows - i); ++r) {
            T* c_row = c + (i0 + i + r) * ldc + j;
            for (int64_t t = 0; t < cols; ++t) c_row[t] += acc[r][t];
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Threads and shapes.

// Runs fn(0) .. fn(tasks - 1) on up to hardware_concurrency() threads.
void parallel_for(int64_t tasks, const std::function<void(int64_t)>& fn) {
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t workers = std::min(tasks, hardware);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t t = next++; t < tasks; t = next++) fn(t);
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

// How many chunks to cut `length` into when `units` independent units exist: enough for
// every thread to have a few tasks (causal chunks differ in cost), none below `block`.
int64_t chunk_count(int64_t units, int64_t length, int64_t block) {
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t wanted = (4 * hardware + units - 1) / std::max<int64_t>(units, 1);
  return std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, (length + block - 1) / block));
}

// Floor division for a possibly negative numerator.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((b - 1 - a) / b); }

// One past the last key any of rows [0, i] sees (the masks' bounds never decrease with i).
int64_t visible_keys(const Problem& p, int64_t i) {
  return std::max<int64_t>(0, visible_range(p, i).second);
}

// Strided views of one (batch, head) slice of a (batch, seqlen, heads, head_dim) tensor:
// rows are sequence positions, columns head_dim.
template <typename T>
View<T> head_view(const T* data, int64_t b, int64_t seqlen, int64_t head, int64_t heads,
                  int64_t head_dim) {
  return {data + ((b * seqlen) * heads + head) * head_dim, heads * head_dim, 1};
}

int64_t kv_head(const Problem& p, int64_t h) { return h / (p.heads_q / p.heads_kv); }

// Wrong sizes would read or write out of bounds: refuse them with a message instead.
void check_inputs(const char* function, const Problem& p,
                  std::initializer_list<std::pair<const char*, const std::vector<double>*>> q_like,
                  std::initializer_list<std::pair<const char*, const std::vector<double>*>> kv_like,
                  std::initializer_list<std::pair<const char*, const std::vector<double>*>> v_like = {},
                  std::initializer_list<std::pair<const char*, const std::vector<double>*>> o_like = {}) {
  auto fail = [function](const std::string& what) {
    throw std::invalid_argument(std::string("reference::") + function + ": " + what);
  };
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) {
    fail("heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" +
         std::to_string(p.heads_kv) + ")");
  }
  if (!p.sinks.empty() && static_cast<int64_t>(p.sinks.size()) != p.heads_q) {
    fail("sinks has " + std::to_string(p.sinks.size()) + " values, expected heads_q = " + std::to_string(p.heads_q));
  }
  for (auto [inputs, expected] :
       {std::pair{q_like, p.q_elements()}, {kv_like, p.kv_elements()}, {v_like, p.v_elements()},
        {o_like, p.o_elements()}}) {
    for (auto [name, x] : inputs) {
      if (static_cast<int64_t>(x->size()) != expected) {
        fail(std::string(name) + " has " + std::to_string(x->size()) + " elements, expected " +
             std::to_string(expected));
      }
    }
  }
}

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// ---------------------------------------------------------------------------------------
// Forward, in T = double (the reference) or T = float (the low-precision emulation).

// Scaled scores of `rows` query rows (rows i0.. of their sequence, viewed by q) against
// keys [0, keys), into s (row stride `keys`), then replaced by the softmax of the visible
// part, with the head's sink (-inf: none) in the denominator; masked entries and rows
// that see nothing become 0. Writes LSE if lse != nullptr.
template <typename T>
void softmax_rows(const Problem& p, View<T> q, View<T> k, int64_t i0, int64_t rows,
                  int64_t keys, T sink, std::vector<T>& s, T* lse) {
  s.assign(rows * keys, T(0));
  gemm_acc<T>(rows, keys, p.head_dim, q, k.transposed(), s.data(), keys);
  const T scale = static_cast<T>(p.softmax_scale);
  const T softcap = static_cast<T>(p.softcap);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = &s[r * keys];
    const auto [first_key, end_key] = visible_range(p, i0 + r);
    const int64_t begin = std::clamp<int64_t>(first_key, 0, keys);
    const int64_t end = std::clamp<int64_t>(end_key, begin, keys);
    T max = sink;
    for (int64_t j = begin; j < end; ++j) {
      row[j] *= scale;
      if (softcap > 0) row[j] = softcap * std::tanh(row[j] / softcap);
      max = std::max(max, row[j]);
    }
    T sum = max == kNegInf<T> ? T(0) : std::exp(sink - max);
    for (int64_t j = begin; j < end; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    for (int64_t j = begin; j < end; ++j) row[j] /= sum;
    std::fill(row, row + begin, T(0));
    std::fill(row + end, row + keys, T(0));
    if (lse) lse[r] = sum > 0 ? max + std::log(sum) : kNegInf<T>;
  }
}

// O (and LSE when lse != nullptr) for every head. P goes through round_p before P V,
// which is how the low-precision emulation rounds P to its input type.
template <typename T, typename RoundP>
void forward_impl(const Problem& p, const T* q, const T* k, const T* v, T* o, T* lse,
                  RoundP round_p) {
  const int64_t heads = p.batch * p.heads_q;
  const int64_t chunks = chunk_count(heads, p.seqlen_q, kRowBlock);
  const int64_t chunk_rows = (p.seqlen_q + chunks - 1) / chunks;
  parallel_for(heads * chunks, [&](int64_t task) {
    const int64_t b = task / chunks / p.heads_q, h = task / chunks % p.heads_q;
    const int64_t g = kv_head(p, h), d = p.head_dim, dv = p.value_head_dim();
    const View<T> qh = head_view(q, b, p.seqlen_q, h, p.heads_q, d);
    const View<T> kh = head_view(k, b, p.seqlen_k, g, p.heads_kv, d);
    const View<T> vh = head_view(v, b, p.seqlen_k, g, p.heads_kv, dv);
    const int64_t o_row_stride = p.heads_q * dv;
    // Last chunks first: under the causal mask their rows see the most keys.
    const int64_t chunk = chunks - 1 - task % chunks;
    const int64_t end = std::min(p.seqlen_q, (chunk + 1) * chunk_rows);
    std::vector<T> s;
    for (int64_t i0 = chunk * chunk_rows; i0 < end; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, end - i0);
      // Causal rows see a prefix of the keys: stop at the last row's prefix.
      const int64_t keys = visible_keys(p, i0 + rows - 1);
      T* lse_rows = lse ? lse + (b * p.heads_q + h) * p.seqlen_q + i0 : nullptr;
      const T sink = p.sinks.empty() ? kNegInf<T> : static_cast<T>(p.sinks[h]);
      softmax_rows(p, View<T>{qh.data + i0 * qh.row_stride, qh.row_stride, 1}, kh, i0, rows,
                   keys, sink, s, lse_rows);
      for (T& x : s) x = round_p(x);
      T* o_rows = o + ((b * p.seqlen_q + i0) * p.heads_q + h) * dv;
      for (int64_t r = 0; r < rows; ++r) std::fill_n(o_rows + r * o_row_stride, dv, T(0));
      gemm_acc<T>(rows, dv, keys, View<T>{s.data(), keys, 1}, vh, o_rows, o_row_stride);
    }
  });
}

}  // namespace

std::pair<int64_t, int64_t> visible_range(const Problem& p, int64_t i) {
  const int64_t position = i + p.seqlen_k - p.seqlen_q;  // the query's diagonal key
  const int64_t right = p.causal ? 0 : p.window_right;
  int64_t begin = p.window_left >= 0 ? position - p.window_left : 0;
  int64_t end = right >= 0 ? position + right + 1 : p.seqlen_k;
  if (p.attention_chunk > 0) {
    const int64_t chunk_begin = floor_div(position, p.attention_chunk) * p.attention_chunk;
    begin = std::max(begin, chunk_begin);
    end = std::min(end, chunk_begin + p.attention_chunk);
  }
  return {std::max<int64_t>(begin, 0), std::min(end, p.seqlen_k)};
}

bool is_visible(const Problem& p, int64_t i, int64_t j) {
  const auto [begin, end] = visible_range(p, i);
  return j >= begin && j < end;
}

void forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
             const std::vector<double>& v, std::vector<double>& o, std::vector<double>& lse) {
  check_inputs("forward", p, {{"q", &q}}, {{"k", &k}}, {{"v", &v}});
  o.assign(p.o_elements(), 0.0);
  lse.assign(p.lse_elements(), 0.0);
  forward_impl<double>(p, q.data(), k.data(), v.data(), o.data(), lse.data(),
                       [](double x) { return x; });
}

float round_to(Precision precision, float x) {
  return precision == Precision::kFloat16 ? half_bits_to_float(float_to_half_bits(x))
                                          : bfloat16_bits_to_float(float_to_bfloat16_bits(x));
}

void forward_low_precision(const Problem& p, Precision precision, const std::vector<double>& q,
                           const std::vector<double>& k, const std::vector<double>& v,
                           std::vector<double>& o) {
  check_inputs("forward_low_precision", p, {{"q", &q}}, {{"k", &k}}, {{"v", &v}});
  // The inputs are representable in the 16-bit type, so float holds them exactly.
  const std::vector<float> qf(q.begin(), q.end());
  const std::vector<float> kf(k.begin(), k.end());
  const std::vector<float> vf(v.begin(), v.end());
  std::vector<float> of(p.o_elements(), 0.0f);
  forward_impl<float>(p, qf.data(), kf.data(), vf.data(), of.data(), nullptr,
                      [precision](float x) { return round_to(precision, x); });
  o.resize(of.size());
  std::transform(of.begin(), of.end(), o.begin(),
                 [precision](float x) { return static_cast<double>(round_to(precision, x)); });
}

// ---------------------------------------------------------------------------------------
// Backward. Two passes so that no two tasks write the same element (no locks, no
// reduction buffers, deterministic): pass 1 over query rows gives dQ and each row's LSE
// and D = rowsum(P * dP) (= rowsum(dO * O)); pass 2 over key blocks recomputes P and dS
// from them and gives dK and dV, summing over the Q heads that share a KV head.

namespace {

// The backward in T = double (the reference) or T = float (the low-precision emulation):
// dQ, dK, dV and, when d_sinks is given, the sinks' gradient. P and dS go through `round`
// before they enter a GEMM, as the kernels round them to the input type. With
// delta_from_output, D = rowsum(dO * O) takes O = P V rounded to the input type, as the
// kernels read the forward's O (otherwise D = rowsum(P * dP), the same in exact arithmetic).
template <typename T, typename Round>
void backward_impl(const Problem& p, const T* q, const T* k, const T* v, const T* d_o, T* dq, T* dk, T* dv,
                   double* d_sinks, Round round, bool delta_from_output) {
  using V = View<T>;
  const int64_t d = p.head_dim, dvv = p.value_head_dim();
  const int64_t q_stride = p.heads_q * d, k_stride = p.heads_kv * d;
  const int64_t o_stride = p.heads_q * dvv, v_stride = p.heads_kv * dvv;
  const T scale = static_cast<T>(p.softmax_scale), softcap = static_cast<T>(p.softcap);
  std::vector<T> lse(p.lse_elements()), delta(p.lse_elements());
  auto sink_of = [&](int64_t h) { return p.sinks.empty() ? kNegInf<T> : static_cast<T>(p.sinks[h]); };
  // d(scaled, capped score) / d(raw score): the scale, times 1 - tanh^2 under a softcap.
  auto score_slope = [&](T capped) {
    if (!(softcap > 0)) return scale;
    const T t = capped / softcap;
    return scale * (T(1) - t * t);
  };

  // Pass 1 over query rows: P, dP = dO V^T, D = rowsum(P * dP) (= rowsum(dO * O)),
  // dS = P * (dP - D) * slope, dQ = dS K; keeps each row's LSE and D for pass 2.
  const int64_t heads = p.batch * p.heads_q;
  const int64_t row_chunks = chunk_count(heads, p.seqlen_q, kRowBlock);
  const int64_t chunk_rows = (p.seqlen_q + row_chunks - 1) / row_chunks;
  parallel_for(heads * row_chunks, [&](int64_t task) {
    const int64_t b = task / row_chunks / p.heads_q, h = task / row_chunks % p.heads_q;
    const int64_t g = kv_head(p, h);
    const V kh = head_view(k, b, p.seqlen_k, g, p.heads_kv, d);
    const V vh = head_view(v, b, p.seqlen_k, g, p.heads_kv, dvv);
    const int64_t chunk = row_chunks - 1 - task % row_chunks;  // longest first, as the forward
    const int64_t end = std::min(p.seqlen_q, (chunk + 1) * chunk_rows);
    std::vector<T> s, dp, o_rows;
    for (int64_t i0 = chunk * chunk_rows; i0 < end; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, end - i0);
      const int64_t keys = visible_keys(p, i0 + rows - 1);
      const int64_t stats = (b * p.heads_q + h) * p.seqlen_q + i0;
      const V q_rows{q + ((b * p.seqlen_q + i0) * p.heads_q + h) * d, q_stride, 1};
      const V do_rows{d_o + ((b * p.seqlen_q + i0) * p.heads_q + h) * dvv, o_stride, 1};
      softmax_rows(p, q_rows, kh, i0, rows, keys, sink_of(h), s, &lse[stats]);
      dp.assign(rows * keys, T(0));
      gemm_acc<T>(rows, keys, dvv, do_rows, vh.transposed(), dp.data(), keys);
      if (delta_from_output) {
        o_rows.resize(s.size());
        std::transform(s.begin(), s.end(), o_rows.begin(), round);  // P in the input type
        std::vector<T> o(rows * dvv, T(0));
        gemm_acc<T>(rows, dvv, keys, V{o_rows.data(), keys, 1}, vh, o.data(), dvv);
        o_rows = std::move(o);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T sum = 0;
        if (delta_from_output) {
          for (int64_t c = 0; c < dvv; ++c) sum += do_rows.at(r, c) * round(o_rows[r * dvv + c]);
        } else {
          for (int64_t j = 0; j < keys; ++j) sum += s[r * keys + j] * dp[r * keys + j];
        }
        delta[stats + r] = sum;
        for (int64_t j = 0; j < keys; ++j) {
          const T pr = s[r * keys + j];
          // The capped score from P itself: log P + LSE (P = 0 needs none: dS is 0).
          const T slope = pr > 0 ? score_slope(std::log(pr) + lse[stats + r]) : scale;
          dp[r * keys + j] = round(pr * (dp[r * keys + j] - sum) * slope);
        }
      }
      gemm_acc<T>(rows, d, keys, V{dp.data(), keys, 1}, kh, &dq[((b * p.seqlen_q + i0) * p.heads_q + h) * d],
                  q_stride);
    }
  });

  // A sink is a score without a value row: its gradient is -sum over rows of P_sink * D.
  if (d_sinks != nullptr) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      double sum = 0;
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t i = 0; i < p.seqlen_q; ++i) {
          const int64_t x = (b * p.heads_q + h) * p.seqlen_q + i;
          if (lse[x] != kNegInf<T>) sum -= std::exp(double(sink_of(h)) - double(lse[x])) * double(delta[x]);
        }
      }
      d_sinks[h] = p.sinks.empty() ? 0.0 : sum;
    }
  }

  // Pass 2 over key blocks: P and dS again from the LSE and D, dV = P^T dO and dK = dS^T Q,
  // summed over the Q heads that share a KV head.
  const int64_t group = p.heads_q / p.heads_kv;
  const int64_t key_blocks = (p.seqlen_k + kKeyBlock - 1) / kKeyBlock;
  parallel_for(p.batch * p.heads_kv * key_blocks, [&](int64_t task) {
    const int64_t b = task / key_blocks / p.heads_kv, g = task / key_blocks % p.heads_kv;
    const int64_t j0 = task % key_blocks * kKeyBlock;
    const int64_t keys = std::min(kKeyBlock, p.seqlen_k - j0);
    const int64_t key_row = (b * p.seqlen_k + j0) * p.heads_kv + g;
    const V k_keys{k + key_row * d, k_stride, 1}, v_keys{v + key_row * dvv, v_stride, 1};
    // Under a causal mask or window, rows before this one see none of these keys.
    const bool right_bound = p.causal || p.window_right >= 0;  // (a chunk's end is no lower)
    const int64_t first_row =
        right_bound ? std::max<int64_t>(0, j0 - p.seqlen_k + p.seqlen_q - std::max<int64_t>(0, p.causal ? 0 : p.window_right)) : 0;
    std::vector<T> pr, slope, dp;
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t i0 = first_row; i0 < p.seqlen_q; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, p.seqlen_q - i0);
        const int64_t stats = (b * p.heads_q + h) * p.seqlen_q + i0;
        const V q_rows{q + ((b * p.seqlen_q + i0) * p.heads_q + h) * d, q_stride, 1};
        const V do_rows{d_o + ((b * p.seqlen_q + i0) * p.heads_q + h) * dvv, o_stride, 1};
        pr.assign(rows * keys, T(0));
        slope.assign(rows * keys, T(0));
        gemm_acc<T>(rows, keys, d, q_rows, k_keys.transposed(), pr.data(), keys);
        for (int64_t r = 0; r < rows; ++r) {
          const auto [first_key, end_key] = visible_range(p, i0 + r);
          const int64_t begin = std::clamp<int64_t>(first_key - j0, 0, keys);
          const int64_t end = std::clamp<int64_t>(end_key - j0, begin, keys);
          T* row = &pr[r * keys];
          for (int64_t j = begin; j < end; ++j) {
            T x = scale * row[j];
            if (softcap > 0) x = softcap * std::tanh(x / softcap);
            slope[r * keys + j] = score_slope(x);
            row[j] = std::exp(x - lse[stats + r]);
          }
          std::fill(row, row + begin, T(0));
          std::fill(row + end, row + keys, T(0));
        }
        dp.assign(rows * keys, T(0));
        gemm_acc<T>(rows, keys, dvv, do_rows, v_keys.transposed(), dp.data(), keys);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < keys; ++j) {
            const int64_t x = r * keys + j;
            dp[x] = round(pr[x] * (dp[x] - delta[stats + r]) * slope[x]);
            pr[x] = round(pr[x]);
          }
        }
        gemm_acc<T>(keys, dvv, rows, V{pr.data(), 1, keys}, do_rows, &dv[key_row * dvv], v_stride);
        gemm_acc<T>(keys, d, rows, V{dp.data(), 1, keys}, q_rows, &dk[key_row * d], k_stride);
      }
    }
  });
}

}  // namespace

void backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& d_o, std::vector<double>& dq,
              std::vector<double>& dk, std::vector<double>& dv, std::vector<double>* d_sinks) {
  check_inputs("backward", p, {{"q", &q}}, {{"k", &k}}, {{"v", &v}}, {{"d_o", &d_o}});
  dq.assign(p.q_elements(), 0.0);
  dk.assign(p.kv_elements(), 0.0);
  dv.assign(p.v_elements(), 0.0);
  if (d_sinks) d_sinks->assign(p.heads_q, 0.0);
  backward_impl<double>(p, q.data(), k.data(), v.data(), d_o.data(), dq.data(), dk.data(), dv.data(),
                        d_sinks ? d_sinks->data() : nullptr, [](double x) { return x; }, false);
}

void backward_low_precision(const Problem& p, Precision precision, const std::vector<double>& q,
                            const std::vector<double>& k, const std::vector<double>& v,
                            const std::vector<double>& d_o, std::vector<double>& dq, std::vector<double>& dk,
                            std::vector<double>& dv) {
  check_inputs("backward_low_precision", p, {{"q", &q}}, {{"k", &k}}, {{"v", &v}}, {{"d_o", &d_o}});
  // The inputs are representable in the 16-bit type, so float holds them exactly.
  auto to_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const std::vector<float> qf = to_float(q), kf = to_float(k), vf = to_float(v), df = to_float(d_o);
  std::vector<float> dqf(p.q_elements(), 0.f), dkf(p.kv_elements(), 0.f), dvf(p.v_elements(), 0.f);
  auto round = [precision](float x) { return round_to(precision, x); };
  backward_impl<float>(p, qf.data(), kf.data(), vf.data(), df.data(), dqf.data(), dkf.data(), dvf.data(), nullptr,
                       round, /*delta_from_output=*/true);
  auto to_output = [&](const std::vector<float>& x, std::vector<double>& out) {
    out.resize(x.size());
    std::transform(x.begin(), x.end(), out.begin(), [&](float e) { return static_cast<double>(round(e)); });
  };
  to_output(dqf, dq);
  to_output(dkf, dk);
  to_output(dvf, dv);
}

}  // namespace warpflash::reference
