// backward(): validation, the workspace, and the launches.
#include <cmath>
#include <string>

#include "api/tensor_checks.h"
#include "api/text.h"
#include "kernels/backward/prepost.h"
#include "warpflash/backward.h"

namespace warpflash {
namespace kernels {
#define WARPFLASH_BACKWARD_INSTANCE(dtype, head_dim, head_dim_v, name) \
  Status name(BackwardArgs const& args, float softmax_scale);
#include "backward_instances.inc"
#undef WARPFLASH_BACKWARD_INSTANCE
}  // namespace kernels

namespace {

using text::concat;
using text::Hex;

constexpr const char* kApi = "warpflash::backward";

Status invalid(const std::string& message) { return Status::InvalidArgument(concat(kApi, ": ", message)); }

bool empty_problem(const ForwardArgs& f) {
  return f.shape.batch == 0 || f.shape.seqlen_q == 0 || (f.cu_seqlens_q != nullptr && f.total_q == 0);
}

}  // namespace

Status validate_backward(const BackwardArgs& args) {
  const ForwardArgs& f = args.forward;
  Status status = validate_forward(f);
  if (!status.ok()) {
    // The same message, said of backward()'s `forward` argument.
    std::string message = status.message();
    const std::string prefix = "warpflash::forward: ";
    if (message.compare(0, prefix.size(), prefix) == 0) message = message.substr(prefix.size());
    return Status(status.code(), concat(kApi, ": in forward: ", message));
  }
  if (f.dtype == DType::kFloat8E4M3) {
    return Status::NotSupported(concat(kApi, ": forward.dtype = float8_e4m3fn is not supported (the backward runs on "
                                       "float16 and bfloat16)"));
  }
  const char* cache_field = f.kv_batch_idx != nullptr ? "kv_batch_idx"
                            : f.page_table != nullptr ? "page_table"
                            : f.leftpad_k != nullptr  ? "leftpad_k"
                                                      : nullptr;
  if (cache_field != nullptr) {
    return Status::NotSupported(concat(kApi, ": forward.", cache_field, " is not supported (a KV cache's index: the "
                                       "backward takes dense or packed K and V)"));
  }
  if (empty_problem(f)) return Status::Ok();
  if (f.lse == nullptr) return invalid("forward.lse is null: the backward needs the forward's LSE");
  const AttentionShape& s = f.shape;
  int bytes = dtype_size_bytes(f.dtype);
  bool packed_q = f.cu_seqlens_q != nullptr, packed_k = f.cu_seqlens_k != nullptr;
  int64_t batch_q = packed_q ? 1 : s.batch, rows_q = packed_q ? f.total_q : s.seqlen_q;
  int64_t batch_k = packed_k ? 1 : s.batch, rows_k = packed_k ? f.total_k : s.seqlen_k;
  bool keys_empty = rows_k == 0 || s.seqlen_k == 0;
  struct Gradient {
    const char* name;
    const TensorView4d& view;
    int64_t batch, rows, heads;
    bool may_be_null;
  };
  for (const Gradient& g : {Gradient{"d_o", args.d_o, batch_q, rows_q, s.heads_q, false},
                            Gradient{"d_q", args.d_q, batch_q, rows_q, s.heads_q, false},
                            Gradient{"d_k", args.d_k, batch_k, rows_k, s.heads_kv, keys_empty},
                            Gradient{"d_v", args.d_v, batch_k, rows_k, s.heads_kv, keys_empty}}) {
    status = check_tensor_view(kApi, g.name, g.view, g.batch, g.rows, g.heads, bytes, g.may_be_null);
    if (!status.ok()) return status;
  }
  if (f.learnable_sink != nullptr && args.d_sink == nullptr) {
    return invalid("d_sink is null: forward.learnable_sink is set, and its gradient (fp32, heads_q) goes to d_sink");
  }
  if (f.learnable_sink == nullptr && args.d_sink != nullptr) {
    return invalid("d_sink is set but forward.learnable_sink is null: there is no sink to differentiate");
  }
  if (reinterpret_cast<uintptr_t>(args.d_sink) % alignof(float) != 0) {
    return invalid(concat("d_sink = ", Hex{reinterpret_cast<uintptr_t>(args.d_sink)},
                          " is not 4-byte aligned (an fp32 array is required)"));
  }
  size_t needed = kernels::backward_workspace(args).bytes;
  if (args.workspace == nullptr || args.workspace_bytes < needed) {
    return invalid(concat("workspace = ", Hex{reinterpret_cast<uintptr_t>(args.workspace)},
                          " with workspace_bytes = ", args.workspace_bytes, ": this problem needs ", needed,
                          " bytes (backward_workspace_bytes())"));
  }
  if (reinterpret_cast<uintptr_t>(args.workspace) % 16 != 0) {
    return invalid(concat("workspace = ", Hex{reinterpret_cast<uintptr_t>(args.workspace)}, " is not 16-byte aligned"));
  }
  return Status::Ok();
}

size_t backward_workspace_bytes(const BackwardArgs& args) {
  if (!validate_forward(args.forward).ok() || empty_problem(args.forward)) return 0;
  return kernels::backward_workspace(args).bytes;
}

Status backward(const BackwardArgs& args) {
  Status status = validate_backward(args);
  if (!status.ok()) return status;
  const ForwardArgs& f = args.forward;
  if (empty_problem(f)) return Status::Ok();
  float scale = f.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(f.shape.head_dim)));
  using Launcher = Status (*)(BackwardArgs const&, float);
  struct Instance {
    DType dtype;
    int64_t head_dim, head_dim_v;
    Launcher launch;
  };
  static const Instance kInstances[] = {
#define WARPFLASH_BACKWARD_INSTANCE(dtype, head_dim, head_dim_v, name) \
  {DType::dtype, head_dim, head_dim_v, kernels::name},
#include "backward_instances.inc"
#undef WARPFLASH_BACKWARD_INSTANCE
      {DType::kBFloat16, 0, 0, nullptr}};
  for (const Instance& instance : kInstances) {
    if (instance.launch != nullptr && instance.dtype == f.dtype && instance.head_dim == f.shape.head_dim &&
        instance.head_dim_v == f.shape.value_head_dim()) {
      return instance.launch(args, scale);
    }
  }
  return Status::NotSupported(concat(kApi, ": this build has no ", dtype_name(f.dtype),
                                     " backward kernel for head_dim = ", f.shape.head_dim,
                                     ", head_dim_v = ", f.shape.value_head_dim(),
                                     " (the backward has head dims 64, 96, 128, 192, 256 and (192, 128))"));
}

}  // namespace warpflash
