// forward(): validation, the device check, the empty-problem cases and the dispatch to
// a compiled kernel.
#include <cmath>

#include <cuda_runtime_api.h>

#include "api/device_checks.h"
#include "api/dispatch.h"
#include "api/text.h"
#include "kernels/attention/split_tail.h"
#include "warpflash/forward.h"

namespace warpflash {

namespace kernels {
#define WARPFLASH_FORWARD_INSTANCE(dtype, head_dim, head_dim_v, variant, loops, name) \
  Status name(const ForwardArgs&, float, const ForwardPlan&);
#include "forward_instances.inc"
#undef WARPFLASH_FORWARD_INSTANCE
}  // namespace kernels

namespace {

struct ForwardEntry {
  DType dtype;
  int head_dim;
  int head_dim_v;
  kernels::ForwardVariant variant;
  int loops;  // kernels::ForwardLoops
  ForwardLauncher launch;
};

// Generated from WARPFLASH_DTYPES x the manifest's lines of WARPFLASH_HEAD_DIMS, in the
// manifest's order (ascending head dims) per dtype.
const ForwardEntry kForwardKernels[] = {
#define WARPFLASH_FORWARD_INSTANCE(dtype, head_dim, head_dim_v, variant, loops, name) \
  {DType::dtype, head_dim, head_dim_v, kernels::ForwardVariant::variant, loops, &kernels::name},
#include "forward_instances.inc"
#undef WARPFLASH_FORWARD_INSTANCE
};

}  // namespace

ForwardLauncher find_forward_launcher(DType dtype, int64_t head_dim, int64_t head_dim_v,
                                      kernels::ForwardVariant variant, bool plain) {
  // The general loop serves plain problems too.
  int loops = plain ? kernels::kBothLoops : kernels::kGeneralLoop;
  for (const ForwardEntry& entry : kForwardKernels) {
    if (entry.dtype == dtype && entry.head_dim == head_dim && entry.head_dim_v == head_dim_v &&
        entry.variant == variant && (entry.loops & loops) != 0) {
      return entry.launch;
    }
  }
  return nullptr;
}

std::string compiled_kernels() {
  static const char* const kLoopNames[] = {"", "plain loop", "general loop", "both loops"};
  std::string list;
  for (const ForwardEntry& entry : kForwardKernels) {
    list += text::concat(list.empty() ? "" : ", ", dtype_name(entry.dtype), " d", entry.head_dim);
    if (entry.head_dim_v != entry.head_dim) list += text::concat("/", entry.head_dim_v);
    list += text::concat(" ", kernels::forward_variant_name(entry.variant), " (", kLoopNames[entry.loops], ")");
  }
  return list.empty() ? "none" : list;
}

std::vector<HeadDims> compiled_head_dim_pairs(DType dtype) {
  std::vector<HeadDims> pairs;
  for (const ForwardEntry& entry : kForwardKernels) {
    if (entry.dtype == dtype && entry.variant == kernels::ForwardVariant::kDefault) {
      pairs.push_back({entry.head_dim, entry.head_dim_v});
    }
  }
  return pairs;
}

std::vector<int> compiled_head_dims(DType dtype) {
  std::vector<int> head_dims;
  for (HeadDims dims : compiled_head_dim_pairs(dtype)) {
    if (dims.v == dims.qk) head_dims.push_back(dims.qk);
  }
  return head_dims;
}

namespace {

int current_sm_count() {
  int device = 0, sm_count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return sm_count;
}

// What forward() runs: the arguments as the kernel sees them (packed GQA's view) and the
// plan. with_workspace: whether the call will have forward_workspace_bytes() of workspace
// (an automatic split needs it).
struct ForwardLaunch {
  ForwardArgs args;
  kernels::ForwardPlan plan;
};
ForwardLaunch plan_forward(const ForwardArgs& args, bool with_workspace) {
  ForwardLaunch launch{args, {}};
  launch.plan.pack = kernels::pack_gqa_factor(args);
  if (launch.plan.pack > 1) {
    launch.args = kernels::packed_gqa_view(args, launch.plan.pack);
    if (args.shape.seqlen_q > 1) launch.plan.q_rows = args.q;
    launch.plan.o_head_stride = args.o.head_stride;
  }
  if (args.num_splits > 1) {
    launch.plan.splits = static_cast<int>(args.num_splits);
  } else if (args.num_splits == 0 && with_workspace && kernels::split_kv_allowed(args)) {
    // The split the tiles of `plan`'s kernel variant call for.
    auto split_for = [&](kernels::ForwardPlan plan) {
      const AttentionShape& shape = launch.args.shape;
      kernels::ForwardTileConfig config = forward_tile_config_of(launch.args, plan);
      int64_t tiles = (shape.seqlen_q + config.block_m - 1) / config.block_m * shape.heads_q * shape.batch;
      int64_t n_blocks = (shape.seqlen_k + config.block_n - 1) / config.block_n;
      bool runs = kernels::split_runs_compiled(int(shape.head_dim), int(shape.value_head_dim()));
      kernels::SplitChoice choice = kernels::choose_split(tiles, n_blocks, current_sm_count(), runs);
      plan.splits = choice.splits;
      plan.split_workers = choice.workers;
      return plan;
    };
    kernels::ForwardPlan split = split_for(launch.plan);
    // A split runs another variant where the plain problem would run a clustered one:
    // its tiles decide the split.
    if (split.split()) split = split_for(split);
    launch.plan = split;
  }
  return launch;
}

}  // namespace

size_t forward_workspace_bytes(const ForwardArgs& args) {
  // Cheap enough for every call of a binding: no full validation (forward() does that).
  const AttentionShape& shape = args.shape;
  if (shape.batch <= 0 || shape.seqlen_q <= 0 || shape.head_dim <= 0 || shape.head_dim > 256 ||
      shape.value_head_dim() <= 0 || shape.value_head_dim() > 256 || args.num_splits < 0 ||
      args.num_splits > kernels::kMaxSplits) {
    return 0;
  }
  ForwardLaunch launch = plan_forward(args, /*with_workspace=*/true);
  if (launch.plan.split()) {
    return kernels::split_kv_workspace_bytes(launch.args, launch.plan,
                                             forward_tile_config_of(launch.args, launch.plan).block_m);
  }
  // The dynamic tile order's counter (launch.h).
  if (kernels::dynamic_tile_order(args)) {
    return kernels::kTileCounterBytes;
  }
  kernels::ForwardTileConfig config = forward_tile_config_of(launch.args, launch.plan);
  if (!config.split_tail ||
      find_forward_launcher(args.dtype, shape.head_dim, shape.value_head_dim(), forward_variant_of(launch.args),
                            kernels::plain_problem(launch.args)) == nullptr) {
    return 0;
  }
  int sm_count = current_sm_count();
  if (sm_count == 0) return 0;
  return kernels::split_workspace_bytes(sm_count, config.block_m, static_cast<int>(shape.value_head_dim()));
}

Status forward(const ForwardArgs& args) {
  Status status = validate_forward(args);
  if (!status.ok()) return status;
  if (args.shape.batch == 0 || args.shape.seqlen_q == 0) return Status::Ok();
  if (args.cu_seqlens_q != nullptr && args.total_q == 0) return Status::Ok();
  if (!(status = check_hopper_device("warpflash::forward")).ok()) return status;
  const std::pair<const char*, const void*> pointers[] = {
      {"q.data", args.q.data}, {"k.data", args.k.data}, {"v.data", args.v.data},
      {"o.data", args.o.data}, {"lse", args.lse}, {"workspace", args.workspace},
      {"cu_seqlens_q", args.cu_seqlens_q}, {"cu_seqlens_k", args.cu_seqlens_k}, {"seqused_q", args.seqused_q},
      {"seqused_k", args.seqused_k}, {"kv_batch_idx", args.kv_batch_idx}, {"page_table", args.page_table},
      {"leftpad_k", args.leftpad_k}, {"learnable_sink", args.learnable_sink}, {"q_descale", args.q_descale},
      {"k_descale", args.k_descale}, {"v_descale", args.v_descale}, {"q_block_scale", args.q_block_scale},
      {"k_block_scale", args.k_block_scale}, {"v_block_scale", args.v_block_scale}};
  for (const auto& [name, pointer] : pointers) {
    if (!args.check_pointers) break;
    if (!(status = check_device_pointer("warpflash::forward", name, pointer)).ok()) return status;
  }
  float scale = args.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(args.shape.head_dim)));
  ForwardLaunch planned = plan_forward(args, args.workspace != nullptr);
  if (planned.plan.split()) {
    size_t needed = kernels::split_kv_workspace_bytes(planned.args, planned.plan,
                                                      forward_tile_config_of(planned.args, planned.plan).block_m);
    if (args.workspace_bytes < needed) {
      return Status::InvalidArgument(text::concat("warpflash::forward: workspace_bytes = ", args.workspace_bytes,
                                                  " is too small for the split-KV of num_splits = ", args.num_splits,
                                                  ": this problem needs ", needed, " (forward_workspace_bytes())"));
    }
  }
  bool plain = kernels::plain_problem(planned.args) && planned.plan.plain();
  kernels::ForwardVariant variant = forward_variant_of(planned.args, planned.plan);
  ForwardLauncher launch =
      find_forward_launcher(args.dtype, args.shape.head_dim, args.shape.value_head_dim(), variant, plain);
  if (launch == nullptr) {  // a manifest without the variant or loop this problem needs
    return Status::NotSupported(text::concat("warpflash::forward: this build has no ", dtype_name(args.dtype),
                                             " kernel for head_dim = ", args.shape.head_dim, ", head_dim_v = ",
                                             args.shape.value_head_dim(), " of the ",
                                             kernels::forward_variant_name(variant), " variant with the ",
                                             plain ? "plain" : "general", " loop; it has ", compiled_kernels()));
  }
  return launch(planned.args, scale, planned.plan);
}

}  // namespace warpflash
