// The forward benchmark's command line: its options, their usage text and the parser.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "warpflash/warpflash.h"

namespace warpflash::bench {

struct Options {
  std::string csv_path;
  std::vector<DType> dtypes = {DType::kBFloat16, DType::kFloat16};
  std::vector<int> head_dims = {64, 128, 256};
  std::vector<int> seqlens = {512, 1024, 2048, 4096, 8192, 16384};
  std::vector<bool> causal = {false, true};
  int iters = 100;
  int warmup = 10;
  bool latency = false;  // time calls of a tiny problem instead of the grid
  bool workspace = true;  // give forward() its workspace (the split last round)
  bool backward = false;  // time backward() (after one forward) instead of forward()
  bool deterministic = false;  // the backward's deterministic mode
  int window_left = -1;  // sliding window's left bound (-1: none); TFLOP/s count visible scores
  float softcap = 0.f;   // Gemma 2's softcap (0: none)
};

inline void print_usage() {
  std::printf(
      "usage: warpflash_bench [options]\n"
      "  --csv PATH            also write results as CSV\n"
      "                        (dtype,head_dim,causal,seqlen,batch,heads,ms_median,ms_min,tflops)\n"
      "  --dtypes LIST         bf16,fp16 (default both)\n"
      "  --head-dims LIST      default 64,128,256; heads = 2048 / head_dim\n"
      "  --seqlens LIST        default 512,1024,2048,4096,8192,16384; batch = 16384 / seqlen\n"
      "  --causal both|0|1     default both\n"
      "  --iters N             timed launches per configuration (default 100)\n"
      "  --latency             instead of the grid: wall time per forward() call of a tiny\n"
      "                        problem (batch 1, seqlen 128, 8 heads, d 128, bf16), printed as\n"
      "                        'latency_us_per_call <us>' (the C++ side of bench/overhead.py)\n"
      "  --warmup N            untimed launches before them (default 10)\n"
      "  --no-workspace        call forward() without a workspace: no split last round\n"
      "  --backward            time backward() (dQ, dK, dV from a random dO; its pre- and\n"
      "                        postprocess included) after one forward; TFLOP/s count 2.5x\n"
      "                        the forward's FLOPs (FlashAttention's convention)\n"
      "  --deterministic       with --backward: its deterministic mode\n"
      "  --window-left N       sliding window: each query also sees the N keys before its\n"
      "                        own (FlashAttention's window_size=(N, -1)); TFLOP/s count the\n"
      "                        visible scores only; the spot checks use min(N, 100)\n"
      "  --softcap X           softcap (Gemma 2): scores become X * tanh(score / X)\n"
      "  --help\n");
}

// Parses "bf16,fp16"; false on any other name.
inline bool parse_dtype_list(const std::string& text, std::vector<DType>& out) {
  out.clear();
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    if (name == "bf16") out.push_back(DType::kBFloat16);
    else if (name == "fp16") out.push_back(DType::kFloat16);
    else return false;
    start = comma + 1;
  }
  return true;
}

// Returns false (after a message) on a malformed command line.
inline bool parse_options(int argc, char** argv, Options& opt, bool& help) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      help = true;
      return true;
    }
    if (flag == "--latency") {
      opt.latency = true;
      continue;
    }
    if (flag == "--no-workspace") {
      opt.workspace = false;
      continue;
    }
    if (flag == "--backward") {
      opt.backward = true;
      continue;
    }
    if (flag == "--deterministic") {
      opt.deterministic = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s: unknown option or missing value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "--csv") {
      opt.csv_path = value;
    } else if (flag == "--dtypes") {
      ok = parse_dtype_list(value, opt.dtypes);
    } else if (flag == "--head-dims") {
      ok = parse_int_list(value, opt.head_dims);
    } else if (flag == "--seqlens") {
      ok = parse_int_list(value, opt.seqlens);
    } else if (flag == "--causal") {
      if (value == "both") opt.causal = {false, true};
      else if (value == "0") opt.causal = {false};
      else if (value == "1") opt.causal = {true};
      else ok = false;
    } else if (flag == "--window-left") {
      std::vector<int> n;
      ok = parse_int_list(value, n) && n.size() == 1 && n[0] >= -1;
      if (ok) opt.window_left = n[0];
    } else if (flag == "--softcap") {
      char* end = nullptr;
      opt.softcap = std::strtof(value.c_str(), &end);
      ok = end != value.c_str() && *end == '\0' && opt.softcap >= 0.f;
    } else if (flag == "--iters" || flag == "--warmup") {
      std::vector<int> n;
      ok = parse_int_list(value, n) && n.size() == 1;
      if (ok) (flag == "--iters" ? opt.iters : opt.warmup) = n[0];
    } else {
      std::fprintf(stderr, "error: unknown option %s (see --help)\n", flag.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "error: %s: bad value '%s' (see --help)\n", flag.c_str(), value.c_str());
      return false;
    }
  }
  if (opt.deterministic && !opt.backward) {
    std::fprintf(stderr, "error: --deterministic is an option of --backward (see --help)\n");
    return false;
  }
  return true;
}

}  // namespace warpflash::bench
