// The head-dim pairs the GPU tests cover: (head_dim of Q and K, head_dim_v of V and O).
// A pair the build did not compile is skipped with a message.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "warpflash/warpflash.h"

namespace warpflash::testing {

inline const HeadDims kTestHeadDims[] = {{64, 64}, {96, 96}, {128, 128}, {192, 192}, {192, 128}, {256, 256}};

inline bool is_compiled(DType dtype, HeadDims dims) {
  for (HeadDims compiled : compiled_head_dim_pairs(dtype)) {
    if (compiled.qk == dims.qk && compiled.v == dims.v) return true;
  }
  return false;
}

// "d128", "d192_v128": for test names.
inline std::string head_dims_name(HeadDims dims) {
  std::string name = "d" + std::to_string(dims.qk);
  if (dims.v != dims.qk) name += "_v" + std::to_string(dims.v);
  return name;
}

}  // namespace warpflash::testing

namespace warpflash {
inline void PrintTo(HeadDims dims, std::ostream* out) { *out << testing::head_dims_name(dims); }
}  // namespace warpflash
