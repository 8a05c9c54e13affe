// KV-cache pieces on the CPU, for the serving kernels' tests (issue 17): rotary position
// embedding as FlashAttention's flash_attn_with_kvcache applies it, and reading a paged
// cache back as dense rows.
#pragma once

#include <cstdint>
#include <vector>

namespace warpflash::reference {

// Rotary embedding of rows of `head_dim` values in place: the first rotary_dim values
// (even, <= head_dim) of row r are rotated by the angles of position positions[r], whose
// cos and sin are rows of (max_position, rotary_dim / 2) tables. interleaved: the pairs
// are (x[2i], x[2i + 1]) (GPT-J); otherwise (x[i], x[i + rotary_dim / 2]) (GPT-NeoX).
// Each pair (a, b) becomes (a cos - b sin, a sin + b cos).
void apply_rotary(std::vector<double>& rows, int64_t head_dim, int64_t rotary_dim,
                  const std::vector<int64_t>& positions, const std::vector<double>& cos,
                  const std::vector<double>& sin, bool interleaved);

// The first `seqlen` tokens of sequence `batch` of a paged cache (num_pages, page_size,
// heads, head_dim) as dense (seqlen, heads, head_dim) rows: token t lives in page
// page_table[batch * max_pages + t / page_size], slot t % page_size.
std::vector<double> gather_paged(const std::vector<double>& cache, int64_t page_size, int64_t heads,
                                 int64_t head_dim, const std::vector<int32_t>& page_table, int64_t max_pages,
                                 int64_t batch, int64_t seqlen);

}  // namespace warpflash::reference
