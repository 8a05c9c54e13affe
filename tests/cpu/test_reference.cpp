// The CPU reference against hand-computed values, a direct transcription of the formula
// and finite differences.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "common/random_values.h"

#include "reference/attention_reference.h"
#include "reference/half_precision.h"

namespace warpflash::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Problem make_problem(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                     int64_t heads_kv, int64_t head_dim, bool causal) {
  Problem p;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  p.causal = causal;
  return p;
}

using warpflash::testing::random_values;

struct Forward {
  std::vector<double> o, lse;
};

Forward run_forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v) {
  Forward f;
  forward(p, q, k, v, f.o, f.lse);
  return f;
}

// The formula written down as plainly as possible, as a second opinion on the blocked code.
Forward direct_forward(const Problem& p, const std::vector<double>& q,
                       const std::vector<double>& k, const std::vector<double>& v) {
  const int64_t d = p.head_dim;
  Forward f{std::vector<double>(p.q_elements(), 0.0), std::vector<double>(p.lse_elements())};
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t g = h / (p.heads_q / p.heads_kv);
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const double* qi = &q[((b * p.seqlen_q + i) * p.heads_q + h) * d];
        std::vector<double> s(p.seqlen_k, -kInf);
        double max = -kInf;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          if (!is_visible(p, i, j)) continue;
          const double* kj = &k[((b * p.seqlen_k + j) * p.heads_kv + g) * d];
          s[j] = 0;
          for (int64_t c = 0; c < d; ++c) s[j] += qi[c] * kj[c] * p.softmax_scale;
          max = std::max(max, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < p.seqlen_k; ++j) sum += s[j] == -kInf ? 0 : std::exp(s[j] - max);
        f.lse[(b * p.heads_q + h) * p.seqlen_q + i] = sum > 0 ? max + std::log(sum) : -kInf;
        double* oi = &f.o[((b * p.seqlen_q + i) * p.heads_q + h) * d];
        for (int64_t j = 0; j < p.seqlen_k && sum > 0; ++j) {
          if (s[j] == -kInf) continue;
          const double* vj = &v[((b * p.seqlen_k + j) * p.heads_kv + g) * d];
          for (int64_t c = 0; c < d; ++c) oi[c] += std::exp(s[j] - max) / sum * vj[c];
        }
      }
    }
  }
  return f;
}

void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                     double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t x = 0; x < actual.size(); ++x) {
    if (std::isinf(expected[x])) {
      EXPECT_EQ(actual[x], expected[x]) << "at " << x;
    } else {
      EXPECT_NEAR(actual[x], expected[x], tolerance * (1 + std::abs(expected[x]))) << "at " << x;
    }
  }
}

TEST(ReferenceForward, SingleKeyGivesItsValueRow) {
  Problem p = make_problem(1, 1, 1, 1, 1, 3, false);
  p.softmax_scale = 0.5;
  const Forward f = run_forward(p, {1, 2, 3}, {4, -1, 2}, {7, -8, 9});
  expect_near_all(f.o, {7, -8, 9}, 1e-15);
  expect_near_all(f.lse, {0.5 * (4 - 2 + 6)}, 1e-15);  // the one score is the LSE
}

TEST(ReferenceForward, TwoByTwoByHand) {
  // Scaled scores: row 0 = (0, ln 3) -> P = (1/4, 3/4); row 1 = (0, 0) -> P = (1/2, 1/2).
  Problem p = make_problem(1, 2, 2, 1, 1, 2, false);
  p.softmax_scale = 0.5;
  const double ln3 = std::log(3.0);
  const Forward f = run_forward(p, {1, 0, 0, 1}, {0, 0, 2 * ln3, 0}, {4, 8, 8, 0});
  expect_near_all(f.o, {7, 2, 6, 4}, 1e-14);
  expect_near_all(f.lse, {std::log(4.0), std::log(2.0)}, 1e-14);
}

TEST(ReferenceForward, EqualScoresAverageTheValues) {
  // Every key is the same vector, so all scores equal q.k * scale = 3 * 0.5.
  Problem p = make_problem(1, 1, 4, 1, 1, 2, false);
  p.softmax_scale = 0.5;
  const Forward f = run_forward(p, {1, 1}, {1, 2, 1, 2, 1, 2, 1, 2}, {1, 0, 2, 10, 3, 20, 6, 30});
  expect_near_all(f.o, {3, 15}, 1e-14);
  expect_near_all(f.lse, {1.5 + std::log(4.0)}, 1e-14);
}

TEST(ReferenceForward, LargeScoresDoNotOverflow) {
  // exp(1000) overflows a double: only a max-subtracted softmax gets this right.
  Problem p = make_problem(1, 1, 2, 1, 1, 1, false);
  const Forward f = run_forward(p, {1000}, {1, 1}, {2, 4});
  expect_near_all(f.o, {3}, 1e-14);
  expect_near_all(f.lse, {1000 + std::log(2.0)}, 1e-14);
}

TEST(ReferenceMask, CausalAlignsToTheBottomRight) {
  const Problem tall = make_problem(1, 4, 2, 1, 1, 1, true);  // query i sees j <= i - 2
  EXPECT_FALSE(is_visible(tall, 1, 0));
  EXPECT_TRUE(is_visible(tall, 2, 0));
  EXPECT_FALSE(is_visible(tall, 2, 1));
  EXPECT_TRUE(is_visible(tall, 3, 1));
  const Problem wide = make_problem(1, 2, 4, 1, 1, 1, true);  // query i sees j <= i + 2
  EXPECT_TRUE(is_visible(wide, 0, 2));
  EXPECT_FALSE(is_visible(wide, 0, 3));
  EXPECT_TRUE(is_visible(wide, 1, 3));
  EXPECT_TRUE(is_visible(make_problem(1, 4, 2, 1, 1, 1, false), 0, 1));
}

TEST(ReferenceForward, CausalWithMoreQueriesThanKeysMasksTheTopRows) {
  // seqlen_q 4, seqlen_k 2: rows 0 and 1 see nothing, row 2 sees key 0, row 3 both.
  Problem p = make_problem(1, 4, 2, 1, 1, 1, true);
  p.softmax_scale = 1;
  const Forward f = run_forward(p, {5, 6, 2, 0}, {1, 3}, {10, 20});
  expect_near_all(f.o, {0, 0, 10, 15}, 1e-14);
  expect_near_all(f.lse, {-kInf, -kInf, 2, std::log(2.0)}, 1e-14);
}

TEST(ReferenceForward, CausalWithFewerQueriesThanKeysSeesAPrefix) {
  // seqlen_q 2, seqlen_k 4, zero queries: row 0 averages keys 0..2, row 1 all four.
  const Problem p = make_problem(1, 2, 4, 1, 1, 1, true);
  const Forward f = run_forward(p, {0, 0}, {1, 2, 3, 4}, {3, 6, 9, 30});
  expect_near_all(f.o, {6, 12}, 1e-14);
  expect_near_all(f.lse, {std::log(3.0), std::log(4.0)}, 1e-14);
}

TEST(ReferenceForward, NoKeysGivesZeroOutputAndNegativeInfinity) {
  const Problem p = make_problem(2, 3, 0, 2, 1, 4, false);
  const Forward f = run_forward(p, random_values(p.q_elements(), 1), {}, {});
  expect_near_all(f.o, std::vector<double>(p.q_elements(), 0.0), 0);
  expect_near_all(f.lse, std::vector<double>(p.lse_elements(), -kInf), 0);
}

TEST(ReferenceForward, RefusesInputsOfTheWrongSize) {
  const Problem p = make_problem(1, 2, 3, 4, 2, 5, false);
  const auto q = random_values(p.q_elements(), 1), kv = random_values(p.kv_elements(), 2);
  std::vector<double> o, lse, dq, dk, dv;
  EXPECT_NO_THROW(forward(p, q, kv, kv, o, lse));
  EXPECT_THROW(forward(p, q, kv, random_values(p.kv_elements() - 1, 3), o, lse),
               std::invalid_argument);
  EXPECT_THROW(backward(p, q, kv, kv, kv, dq, dk, dv), std::invalid_argument);  // dO too small
  Problem uneven = p;
  uneven.heads_kv = 3;
  EXPECT_THROW(forward_low_precision(uneven, Precision::kBFloat16, q, kv, kv, o),
               std::invalid_argument);
}

TEST(ReferenceForward, GqaEqualsEachHeadWithItsKvHead) {
  const Problem p = make_problem(2, 5, 7, 4, 2, 3, true);
  const auto q = random_values(p.q_elements(), 2), k = random_values(p.kv_elements(), 3),
             v = random_values(p.kv_elements(), 4);
  const Forward f = run_forward(p, q, k, v);
  const Problem single = make_problem(1, 5, 7, 1, 1, 3, true);
  for (int64_t b = 0; b < p.batch; ++b) {
    // One head of batch b, as a contiguous (seqlen, head_dim) tensor.
    auto slice = [b](const std::vector<double>& x, int64_t seqlen, int64_t heads, int64_t head) {
      std::vector<double> out;
      for (int64_t i = 0; i < seqlen; ++i) {
        const auto row = x.begin() + ((b * seqlen + i) * heads + head) * 3;
        out.insert(out.end(), row, row + 3);
      }
      return out;
    };
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t g = h / 2;  // heads 0, 1 -> KV head 0; heads 2, 3 -> KV head 1
      const Forward expected = run_forward(single, slice(q, 5, 4, h), slice(k, 7, 2, g),
                                           slice(v, 7, 2, g));
      expect_near_all(slice(f.o, 5, 4, h), expected.o, 1e-14);
      const auto lse = f.lse.begin() + (b * 4 + h) * 5;
      expect_near_all(std::vector<double>(lse, lse + 5), expected.lse, 1e-14);
    }
  }
}

// Each column of O depends only on that column of V: with head_dim_v = 5 < head_dim = 9,
// O is the first 5 columns of O with V's 9 columns of which the first 5 are the same.
TEST(ReferenceForward, ValueHeadDimOfItsOwnIsTheFirstColumnsOfTheWideOne) {
  const Problem wide = make_problem(2, 37, 70, 4, 2, 9, true);
  Problem narrow = wide;
  narrow.head_dim_v = 5;
  const auto q = random_values(wide.q_elements(), 5), k = random_values(wide.kv_elements(), 6),
             v_wide = random_values(wide.kv_elements(), 7);
  std::vector<double> v_narrow;
  for (int64_t row = 0; row < wide.kv_elements() / 9; ++row) {
    v_narrow.insert(v_narrow.end(), v_wide.begin() + row * 9, v_wide.begin() + row * 9 + 5);
  }
  const Forward f_wide = run_forward(wide, q, k, v_wide), f_narrow = run_forward(narrow, q, k, v_narrow);
  ASSERT_EQ(static_cast<int64_t>(f_narrow.o.size()), narrow.o_elements());
  std::vector<double> o_first_columns;
  for (int64_t row = 0; row < wide.o_elements() / 9; ++row) {
    o_first_columns.insert(o_first_columns.end(), f_wide.o.begin() + row * 9, f_wide.o.begin() + row * 9 + 5);
  }
  expect_near_all(f_narrow.o, o_first_columns, 1e-14);
  expect_near_all(f_narrow.lse, f_wide.lse, 0.0);
  EXPECT_THROW(run_forward(narrow, q, k, v_wide), std::invalid_argument);  // V of the wrong size
}

// Shapes that cross the reference's internal blocks (64 rows, 256 keys, 4-wide tiles).
const Problem kOddShapes[] = {
    make_problem(2, 37, 45, 6, 2, 13, false), make_problem(2, 37, 45, 6, 2, 13, true),
    make_problem(1, 70, 300, 2, 1, 20, false), make_problem(1, 70, 300, 2, 1, 20, true),
    make_problem(1, 300, 70, 3, 3, 9, true),
};

TEST(ReferenceForward, MatchesTheDirectFormulaOnOddShapes) {
  for (const Problem& p : kOddShapes) {
    SCOPED_TRACE(::testing::Message() << p.seqlen_q << "x" << p.seqlen_k << " causal " << p.causal);
    const auto q = random_values(p.q_elements(), 5), k = random_values(p.kv_elements(), 6),
               v = random_values(p.kv_elements(), 7);
    const Forward f = run_forward(p, q, k, v), expected = direct_forward(p, q, k, v);
    expect_near_all(f.o, expected.o, 1e-12);
    expect_near_all(f.lse, expected.lse, 1e-12);
  }
}

// Checks backward() against central differences of loss = sum(O * dO) along directions
// in Q, K and V: each element's unit vector when random_directions == 0, else that many
// random unit vectors per tensor (cheaper on larger problems; each sees every element).
void check_gradients(Problem p, int random_directions) {
  SCOPED_TRACE(::testing::Message() << p.seqlen_q << "x" << p.seqlen_k << " causal " << p.causal << " window ("
                                  << p.window_left << ", " << p.window_right << ") softcap " << p.softcap
                                  << " sinks " << p.sinks.size() << " head_dim_v " << p.value_head_dim());
  std::vector<double> q = random_values(p.q_elements(), 8), k = random_values(p.kv_elements(), 9),
                      v = random_values(p.v_elements(), 10);
  const std::vector<double> d_o = random_values(p.o_elements(), 11);
  std::vector<double> dq, dk, dv, d_sinks;
  backward(p, q, k, v, d_o, dq, dk, dv, &d_sinks);
  auto loss = [&] {
    const Forward f = run_forward(p, q, k, v);
    double sum = 0;
    for (size_t x = 0; x < f.o.size(); ++x) sum += f.o[x] * d_o[x];
    return sum;
  };
  const double h = 1e-5;
  struct Checked {
    std::vector<double>* input;
    const std::vector<double>* grad;
    const char* name;
  };
  std::vector<Checked> checked = {{&q, &dq, "dQ"}, {&k, &dk, "dK"}, {&v, &dv, "dV"}};
  if (!p.sinks.empty()) checked.push_back({&p.sinks, &d_sinks, "dsinks"});
  for (auto [input, grad, name] : checked) {
    ASSERT_EQ(grad->size(), input->size());
    const size_t n = input->size();
    const size_t directions = random_directions > 0 ? random_directions : n;
    for (size_t t = 0; t < directions; ++t) {
      std::vector<double> direction(n, 0.0);
      if (random_directions > 0) {
        direction = random_values(n, 100 + t);
        double norm = 0;
        for (double e : direction) norm += e * e;
        for (double& e : direction) e /= std::sqrt(norm);
      } else {
        direction[t] = 1;
      }
      const std::vector<double> saved = *input;
      double predicted = 0;
      for (size_t x = 0; x < n; ++x) {
        predicted += (*grad)[x] * direction[x];
        (*input)[x] = saved[x] + h * direction[x];
      }
      const double up = loss();
      for (size_t x = 0; x < n; ++x) (*input)[x] = saved[x] - h * direction[x];
      const double down = loss();
      *input = saved;
      EXPECT_NEAR(predicted, (up - down) / (2 * h), 1e-7) << name << " along " << t;
    }
  }
}

TEST(ReferenceBackward, MatchesFiniteDifferences) {
  check_gradients(make_problem(2, 3, 5, 4, 2, 3, false), 0);
  check_gradients(make_problem(2, 3, 5, 4, 2, 3, true), 0);
  check_gradients(make_problem(1, 6, 3, 2, 1, 4, true), 0);  // rows 0..2 see nothing
}

TEST(ReferenceBackward, MatchesFiniteDifferencesAcrossBlocks) {
  check_gradients(make_problem(1, 70, 300, 2, 1, 5, false), 3);
  check_gradients(make_problem(1, 70, 300, 2, 1, 5, true), 3);
  check_gradients(make_problem(1, 300, 70, 2, 1, 5, true), 3);
}

// Everything the forward has, one at a time and together: windows, chunks, softcap, sinks
// (their own gradient), a V head dim of its own, GQA.
TEST(ReferenceBackward, MatchesFiniteDifferencesWithEveryOption) {
  Problem window = make_problem(1, 7, 9, 4, 2, 3, false);
  window.window_left = 2;
  window.window_right = 1;
  check_gradients(window, 0);
  Problem chunk = make_problem(1, 9, 9, 2, 1, 3, true);
  chunk.attention_chunk = 4;
  check_gradients(chunk, 0);
  Problem softcap = make_problem(2, 5, 6, 2, 1, 4, true);
  softcap.softcap = 0.7;  // small: the scores reach the flat part of tanh
  softcap.softmax_scale = 2.0;
  check_gradients(softcap, 0);
  Problem sinks = make_problem(2, 6, 3, 4, 2, 3, true);  // rows 0..2 see only the sink
  sinks.sinks = {0.5, -1.0, 2.0, 0.0};
  check_gradients(sinks, 0);
  Problem value_dim = make_problem(2, 5, 7, 4, 2, 6, false);
  value_dim.head_dim_v = 3;
  check_gradients(value_dim, 0);
  Problem long_window = make_problem(1, 40, 600, 2, 1, 4, false);  // key blocks from 256 on: pass 2's first row
  long_window.window_left = 50;
  long_window.window_right = 10;
  check_gradients(long_window, 3);
  Problem all = make_problem(1, 70, 300, 4, 2, 6, true);
  all.window_left = 100;
  all.softcap = 1.5;
  all.sinks = {0.3, -0.2, 1.0, 0.0};
  all.head_dim_v = 4;
  check_gradients(all, 3);
}

// The emulation rounds P and dS to the input type: close to the double backward, not equal.
TEST(ReferenceBackward, LowPrecisionIsCloseToDoubleButNotEqual) {
  Problem p = make_problem(1, 70, 90, 2, 1, 16, true);
  p.head_dim_v = 8;
  auto rounded = [](std::vector<double> x) {
    for (double& e : x) e = round_to(Precision::kBFloat16, static_cast<float>(e));
    return x;
  };
  const auto q = rounded(random_values(p.q_elements(), 1)), k = rounded(random_values(p.kv_elements(), 2)),
             v = rounded(random_values(p.v_elements(), 3)), d_o = rounded(random_values(p.o_elements(), 4));
  std::vector<double> dq, dk, dv, dq_low, dk_low, dv_low;
  backward(p, q, k, v, d_o, dq, dk, dv);
  backward_low_precision(p, Precision::kBFloat16, q, k, v, d_o, dq_low, dk_low, dv_low);
  for (auto [exact, low] : {std::pair{&dq, &dq_low}, {&dk, &dk_low}, {&dv, &dv_low}}) {
    ASSERT_EQ(exact->size(), low->size());
    double max_diff = 0, max_value = 0;
    for (size_t x = 0; x < exact->size(); ++x) {
      max_diff = std::max(max_diff, std::fabs((*exact)[x] - (*low)[x]));
      max_value = std::max(max_value, std::fabs((*exact)[x]));
    }
    EXPECT_GT(max_diff, 0.0);
    EXPECT_LT(max_diff, 0.05 * max_value);
  }
  EXPECT_THROW(backward_low_precision(p, Precision::kBFloat16, q, k, v, q, dq, dk, dv), std::invalid_argument);
}

TEST(ReferenceBackward, RowsThatSeeNothingHaveZeroGradient) {
  const Problem p = make_problem(1, 4, 2, 1, 1, 2, true);  // rows 0 and 1 see no key
  std::vector<double> dq, dk, dv;
  backward(p, random_values(8, 1), random_values(4, 2), random_values(4, 3),
           random_values(8, 4), dq, dk, dv);
  for (int x = 0; x < 4; ++x) EXPECT_EQ(dq[x], 0.0) << x;
  for (double g : dq) EXPECT_FALSE(std::isnan(g));
}

TEST(ReferenceLowPrecision, RoundsPBeforeMultiplyingByV) {
  // Scores (0, -0.5) give P = (0.6224594, 0.3775407) in float; in bfloat16 that is
  // (159/256, 193/512), so O = P . (1, -1) = 250/1024 exactly. Rounding only O would give
  // 251/1024: the difference of P's entries magnifies their rounding.
  const Problem p = make_problem(1, 1, 2, 1, 1, 1, false);
  std::vector<double> o;
  forward_low_precision(p, Precision::kBFloat16, {1}, {0, -0.5}, {1, -1}, o);
  expect_near_all(o, {250.0 / 1024}, 0);
}

double max_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double error = 0, scale = 0;
  for (size_t x = 0; x < a.size(); ++x) {
    error = std::max(error, std::abs(a[x] - b[x]));
    scale = std::max(scale, std::abs(b[x]));
  }
  return error / scale;
}

TEST(ReferenceLowPrecision, IsCloseToDoubleButNotEqual) {
  for (bool causal : {false, true}) {
    const Problem p = make_problem(1, 100, 80, 2, 1, 64, causal);  // rows 0..19 see nothing
    std::vector<double> q = random_values(p.q_elements(), 13),
                        k = random_values(p.kv_elements(), 14),
                        v = random_values(p.kv_elements(), 15);
    double errors[2];
    for (Precision precision : {Precision::kBFloat16, Precision::kFloat16}) {
      auto rounded = [precision](std::vector<double> x) {
        for (double& e : x) e = round_to(precision, static_cast<float>(e));
        return x;
      };
      const auto qr = rounded(q), kr = rounded(k), vr = rounded(v);
      std::vector<double> low;
      forward_low_precision(p, precision, qr, kr, vr, low);
      const Forward exact = run_forward(p, qr, kr, vr);
      for (double x : low) ASSERT_FALSE(std::isnan(x));
      const double error = max_relative_error(low, exact.o);
      errors[precision == Precision::kFloat16] = error;
      EXPECT_GT(error, 0.0);
      EXPECT_LT(error, precision == Precision::kBFloat16 ? 2e-2 : 3e-3);
      for (double x : low) EXPECT_EQ(x, round_to(precision, static_cast<float>(x)));
    }
    EXPECT_GT(errors[0], 5e-4);  // bfloat16 keeps 8 significant bits
    EXPECT_GT(errors[0], errors[1]);  // float16 keeps 11
  }
}

}  // namespace
}  // namespace warpflash::reference
