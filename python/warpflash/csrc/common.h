// What every operator file of the extension shares: tensor views for the C++ API, its
// Status as a Python exception, and dtypes and shapes spelled as Python prints them.
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <torch/extension.h>

#include "warpflash/warpflash.h"

namespace warpflash_torch {

// (batch, seqlen, heads, head_dim), or packed (total, heads, head_dim): batch_stride unused.
inline warpflash::TensorView4d view_of(const at::Tensor& t) {
  if (t.dim() == 3) return {t.data_ptr(), 0, t.stride(0), t.stride(1)};
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

// Library errors keep their message: bad arguments raise ValueError, CUDA failures RuntimeError.
inline void raise_if_error(const warpflash::Status& status) {
  if (status.ok()) return;
  if (status.code() == warpflash::StatusCode::kCudaError) TORCH_CHECK(false, status.message());
  TORCH_CHECK_VALUE(false, status.message());
}

// Messages are built from strings only (numbers through std::to_string): no iostream
// formatting in this extension. Spelled as in Python, so they read like the caller's code.
inline std::string python_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(type);
  }
}

// A shape as Python prints it: (2, 64, 8).
inline std::string python_shape(const at::Tensor& t) {
  std::string text = "(";
  for (int64_t i = 0; i < t.dim(); ++i) text += (i ? ", " : "") + std::to_string(t.size(i));
  return text + (t.dim() == 1 ? ",)" : ")");
}

// An optional int32 vector (cu_seqlens, seqused) of `length` on q's device, contiguous.
inline const int* int_vector(const c10::optional<at::Tensor>& t, const char* name, int64_t length, const at::Tensor& q) {
  if (!t.has_value()) return nullptr;
  TORCH_CHECK_TYPE(t->scalar_type() == at::kInt, "warpflash: ", name, " has dtype ", python_dtype(t->scalar_type()),
                   "; it must be torch.int32");
  TORCH_CHECK_VALUE(t->dim() == 1 && t->size(0) == length, "warpflash: ", name, " has shape ", python_shape(*t),
                    "; expected (", std::to_string(length), ",)");
  TORCH_CHECK_VALUE(t->device() == q.device(), "warpflash: ", name, " is on ", t->device().str(), "; q is on ",
                    q.device().str());
  TORCH_CHECK_VALUE(t->is_contiguous(), "warpflash: ", name, " must be contiguous");
  return t->data_ptr<int>();
}

// An optional page table: int32 (batch, max_pages) on q's device, rows contiguous.
inline const int* page_table_of(const c10::optional<at::Tensor>& table, int64_t batch, const at::Tensor& q) {
  if (!table.has_value()) return nullptr;
  TORCH_CHECK_TYPE(table->scalar_type() == at::kInt, "warpflash: page_table has dtype ",
                   python_dtype(table->scalar_type()), "; it must be torch.int32");
  TORCH_CHECK_VALUE(table->dim() == 2 && table->size(0) == batch && table->size(1) > 0 && table->stride(1) == 1,
                    "warpflash: page_table has shape ", python_shape(*table), "; expected (", std::to_string(batch),
                    ", max_pages) with contiguous rows");
  TORCH_CHECK_VALUE(table->device() == q.device(), "warpflash: page_table is on ", table->device().str(),
                    "; q is on ", q.device().str());
  return table->data_ptr<int>();
}

inline warpflash::DType dtype_of(at::ScalarType type) {
  if (type == at::kFloat8_e4m3fn) return warpflash::DType::kFloat8E4M3;
  return type == at::kBFloat16 ? warpflash::DType::kBFloat16 : warpflash::DType::kFloat16;
}

}  // namespace warpflash_torch
