// Status: the result of every warpflash call. Errors carry a message that names the
// argument, the value and what is allowed; no call throws or aborts on bad input.
#pragma once

#include <string>
#include <utility>

namespace warpflash {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the arguments contradict each other or the conventions
  kNotSupported,     // valid, but this build or this GPU cannot run it
  kCudaError,        // a CUDA call failed
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status NotSupported(std::string message) {
    return Status(StatusCode::kNotSupported, std::move(message));
  }
  static Status CudaError(std::string message) {
    return Status(StatusCode::kCudaError, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace warpflash
