// Error messages without iostreams: numbers formatted with snprintf. (The library is
// linked into other programs, e.g. the PyTorch extension, whose C++ runtime may differ
// from the one it was compiled with; plain functions keep it out of locale machinery.)
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace warpflash::text {

// An address or other bit pattern, printed as 0x...
struct Hex {
  uintptr_t value;
};

inline std::string to_text(const std::string& s) { return s; }
inline std::string to_text(const char* s) { return s; }
inline std::string to_text(Hex h) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(h.value));
  return buffer;
}
inline std::string to_text(const void* p) { return to_text(Hex{reinterpret_cast<uintptr_t>(p)}); }
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
std::string to_text(T value) {
  return std::to_string(value);
}
template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
std::string to_text(T value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(value));
  return buffer;
}

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (out.append(to_text(parts)), ...);
  return out;
}

// "64, 128, 256"
template <class T>
std::string join(const std::vector<T>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + to_text(values[i]);
  return out;
}

}  // namespace warpflash::text
