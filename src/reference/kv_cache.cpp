#include "reference/kv_cache.h"

#include <stdexcept>
#include <string>

namespace warpflash::reference {

void apply_rotary(std::vector<double>& rows, int64_t head_dim, int64_t rotary_dim,
                  const std::vector<int64_t>& positions, const std::vector<double>& cos,
                  const std::vector<double>& sin, bool interleaved) {
  const int64_t half = rotary_dim / 2;
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim || cos.size() != sin.size() ||
      cos.size() % half != 0 || static_cast<int64_t>(rows.size()) != static_cast<int64_t>(positions.size()) * head_dim) {
    throw std::invalid_argument("reference::apply_rotary: rotary_dim = " + std::to_string(rotary_dim) +
                                " must be even and <= head_dim = " + std::to_string(head_dim) +
                                ", with one position per row and (positions, rotary_dim / 2) tables");
  }
  const int64_t max_position = static_cast<int64_t>(cos.size()) / half;
  for (size_t r = 0; r < positions.size(); ++r) {
    if (positions[r] < 0 || positions[r] >= max_position) {
      throw std::invalid_argument("reference::apply_rotary: position " + std::to_string(positions[r]) +
                                  " is outside the tables (" + std::to_string(max_position) + " rows)");
    }
    double* row = &rows[r * head_dim];
    for (int64_t i = 0; i < half; ++i) {
      const double c = cos[positions[r] * half + i], s = sin[positions[r] * half + i];
      double& a = row[interleaved ? 2 * i : i];
      double& b = row[interleaved ? 2 * i + 1 : i + half];
      const double a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = a0 * s + b0 * c;
    }
  }
}

std::vector<double> gather_paged(const std::vector<double>& cache, int64_t page_size, int64_t heads,
                                 int64_t head_dim, const std::vector<int32_t>& page_table, int64_t max_pages,
                                 int64_t batch, int64_t seqlen) {
  const int64_t row = heads * head_dim, page = page_size * row;
  const int64_t num_pages = page > 0 ? static_cast<int64_t>(cache.size()) / page : 0;
  if (page <= 0 || static_cast<int64_t>(cache.size()) != num_pages * page || seqlen > max_pages * page_size ||
      static_cast<int64_t>(page_table.size()) < (batch + 1) * max_pages) {
    throw std::invalid_argument("reference::gather_paged: cache, page table or seqlen do not fit together");
  }
  std::vector<double> out(seqlen * row);
  for (int64_t t = 0; t < seqlen; ++t) {
    const int32_t page_id = page_table[batch * max_pages + t / page_size];
    if (page_id < 0 || page_id >= num_pages) {
      throw std::invalid_argument("reference::gather_paged: page id " + std::to_string(page_id) + " of token " +
                                  std::to_string(t) + " is outside the cache (" + std::to_string(num_pages) +
                                  " pages)");
    }
    const double* src = &cache[page_id * page + (t % page_size) * row];
    std::copy(src, src + row, out.begin() + t * row);
  }
  return out;
}

}  // namespace warpflash::reference
