#!/usr/bin/env bash
# One device call of a development round (kept in the repo so runs are reproducible):
#   scripts/device_round.sh BUILD [EXPERIMENT_BUILD...]
# (from this machine: scripts/stage_builds.sh BUILD ..., then the device tool runs this with
# build-stage/BUILD ... and carry ["build-stage"])
# Steps (ROUND_STEPS, default all):
#   check       GPU tests, SASS and the C++ benchmark with its cuDNN/FA2 comparison
#               (gpu_check.sh) on BUILD;
#   experiments the GPU tests of BUILD and of each experiment build (ablation, tiles),
#               then their timing next to BUILD (compare_builds.sh; COMPARE_ARGS);
#   python      the package built on BUILD's library, pytest (PYTEST_PRELOAD: an
#               LD_PRELOAD for it, e.g. a native-stack printer) and the wrapper overhead;
#   benchmark   the side-by-side Python benchmark (benchmark.py) with plots; COMMIT names
#               the code's commit (the device's copy of .git may be stale).
#   features    varlen, window, softcap, sinks and head dims 96/192 against FA3 / FA4 where installed
#               (bench/features.py), with a bar chart (features.png).
#   backward    (only when named in ROUND_STEPS) the backward's GPU tests (Prepost/*,
#               Backward*), memcheck and racecheck on a few, its C++ timing, pytest
#               test_backward.py, its benchmark against cuDNN and FA4 (bench/backward.py)
#               and the training run (examples/train_gpt.py --check).
#   fp8         (only when named in ROUND_STEPS) the FP8 and quantizer GPU tests, memcheck
#               and racecheck on block-scale cases, the package and pytest test_fp8.py, the
#               accuracy study (bench/fp8_accuracy_gpu.py) and the FP8 benchmark
#               (bench/fp8.py; FP8_BENCH_ARGS) against FA3's and cuDNN's FP8 where installed.
#   decode      (only when named in ROUND_STEPS) serving: the forward's GPU tests of decode,
#               packed GQA, split-KV and paged cases (Features/*decode*, *split*,
#               *speculative*, *paged*),
#               memcheck and racecheck on a few, the package and pytest test_kvcache.py,
#               and the KV-cache benchmark (bench/decode.py; DECODE_ARGS) against FA3, FA4
#               and cuDNN where installed.
#   ring        (only when named in ROUND_STEPS; a machine of 2+ GPUs) ring attention: the
#               package, pytest test_distributed.py and bench/ring_attention.py under torchrun
#               on every GPU (RING_BENCH_ARGS).
#   profile     (only when named in ROUND_STEPS) Nsight Compute counters of BUILD's kernel
#               (PROFILE_KERNEL, a regex, default forward_kernel; PROFILE_SKIP launches of it
#               skipped, default 2; for the backward: backward_kernel, 1, and --backward in
#               the points' arguments) at each point of PROFILE_POINTS
#               ("|"-separated warpflash_bench arguments, e.g. "--head-dims 64 --seqlens 512
#               --causal 1 --dtypes bf16"; the bench's two correctness checks are skipped).
# Everything is packed into $OUT/results.tgz (the device tool brings back few files).
set -uo pipefail  # each step has a time limit: a hang costs minutes, not the whole call
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
build=${1:?usage: scripts/device_round.sh BUILD [EXPERIMENT_BUILD...]}
shift
steps=${ROUND_STEPS:-check experiments python benchmark features}
results=$(mktemp -d)
pack() { tar czf "${OUT:-.}/results.tgz" -C "$results" .; }
trap pack EXIT
has() { [[ " $steps " == *" $1 "* ]]; }
# memcheck and racecheck of the GPU tests the filter $2 selects, logged as $1-<tool>.log.
sanitize() {
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tests/warpflash_gpu_tests" --gtest_brief=1 \
      --gtest_filter="$2" > "$results/$1-$tool.log" 2>&1
    echo "$1 $tool rc=$?"; tail -n 2 "$results/$1-$tool.log"
    # (A filter that matches no test passes silently: this googletest has no
    # --gtest_fail_if_no_test_run.)
    grep -qE '^\[  PASSED  \] [1-9]' "$results/$1-$tool.log" || echo "$1 $tool: no test passed (does the filter match?)"
  done
}
# The Python package on BUILD's library.
install_package() {
  WARPFLASH_PREBUILT_LIB=$build/src/libwarpflash.a python3 -m pip install --no-build-isolation --no-deps -q . \
    > "$results/pip.log" 2>&1 || { echo "pip install failed"; tail -20 "$results/pip.log"; }
}

if has check; then
  TEST_TIMEOUT=${TEST_TIMEOUT:-150} BENCH_TIMEOUT=${BENCH_TIMEOUT:-240} scripts/gpu_check.sh "$build" "$results" \
    > "$results/check.log" 2>&1
  echo "gpu_check rc=$?"
  grep -E "PASSED|FAILED|HGMMA|geomean" "$results/check.log" | head -20
fi
if has experiments; then
  for dir in "$build" "$@"; do
    summary=$(scripts/gpu_tests.sh "$dir" "$results/tests-${dir//\//_}.log")
    echo "$dir GPU tests rc=$? $(echo "$summary" | tr '\n' ' ')"
  done
  if [ $# -gt 0 ]; then
    BENCH_ARGS=${COMPARE_ARGS:-} scripts/compare_builds.sh "$build" "$@" > "$results/compare_builds.log" 2>&1
    cat "$results/compare_builds.log"
  fi
fi
if has profile; then
  IFS='|' read -ra points <<< "${PROFILE_POINTS:-}"
  for i in "${!points[@]}"; do
    # --clock-control none: the device's METHOD.md asks to leave the clocks alone.
    timeout 150 ncu --clock-control none --launch-skip ${PROFILE_SKIP:-2} --launch-count 1 -k regex:${PROFILE_KERNEL:-forward_kernel} \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section LaunchStats \
      "$build/bench/warpflash_bench" ${points[$i]} --warmup 1 --iters 1 > "$results/profile-$i.log" 2>&1
    echo "profile $i (${points[$i]}) rc=$?"
    grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Issued Warp|No Eligible|Stall" "$results/profile-$i.log" | head -20
  done
fi
if has decode; then
  timeout 300 "$build/tests/warpflash_gpu_tests" --gtest_brief=1 \
    --gtest_filter='Features/*decode*:Features/*split*:Features/*speculative*:Features/*paged*' \
    > "$results/decode-tests.log" 2>&1
  echo "decode GPU tests rc=$?"; tail -n 4 "$results/decode-tests.log"
  sanitize decode 'Features/*bf16_d128_decode_gqa_split:Features/*fp16_d128_decode_runs_seqused_causal:Features/*bf16_d64_prefill_causal_three_splits:Features/*fp16_d256_decode_gqa3_seqused_causal:Features/*bf16_d128_paged16_decode_seqused:Features/*bf16_d64_paged1_q3_causal_split:Features/*bf16_d256_paged256_mqa'
  if python3 -c "import torch" 2>/dev/null; then
    install_package
    (cd tests/python && timeout 300 python3 -m pytest -q -ra test_kvcache.py > "$results/pytest-kvcache.log" 2>&1)
    echo "pytest kvcache rc=$?"; tail -n 5 "$results/pytest-kvcache.log"
    (cd bench && timeout 300 python3 decode.py --csv "$results/decode.csv" ${DECODE_ARGS:-} > "$results/decode-bench.log" 2>&1)
    echo "decode bench rc=$?"; cat "$results/decode-bench.log"
  fi
fi

if has fp8; then
  timeout 240 "$build/tests/warpflash_gpu_tests" --gtest_brief=1 --gtest_filter='Fp8*:*Quantiz*:BlockScales*' \
    > "$results/fp8-tests.log" 2>&1
  echo "FP8 GPU tests rc=$?"; tail -n 4 "$results/fp8-tests.log"
  sanitize fp8 'Fp8/*d128_block_scales_gqa:Fp8/*d256_block_scales_with_descales_window:Fp8/*d64_block_scales_odd_lengths'
  if python3 -c "import torch" 2>/dev/null; then
    install_package
    (cd tests/python && timeout 300 python3 -m pytest -q -ra test_fp8.py > "$results/pytest-fp8.log" 2>&1)
    echo "pytest fp8 rc=$?"; tail -n 5 "$results/pytest-fp8.log"
    (cd bench && timeout 120 python3 fp8_accuracy_gpu.py > "$results/fp8-accuracy.log" 2>&1)
    echo "accuracy rc=$?"; cat "$results/fp8-accuracy.log"
    (cd bench && timeout 300 python3 fp8.py ${FP8_BENCH_ARGS:-} > "$results/fp8-bench.log" 2>&1)
    echo "fp8 bench rc=$?"; cat "$results/fp8-bench.log"
  fi
fi
if has ring; then
  install_package
  (cd tests/python && timeout 400 python3 -m pytest -q -ra test_distributed.py > "$results/pytest-ring.log" 2>&1)
  echo "pytest ring rc=$?"; tail -n 5 "$results/pytest-ring.log"
  gpus=$(nvidia-smi -L | wc -l)
  (cd bench && NCCL_NVLS_ENABLE=0 timeout 500 torchrun --standalone --nproc_per_node "$gpus" ring_attention.py \
    ${RING_BENCH_ARGS:-} > "$results/ring-bench.log" 2>&1)
  echo "ring bench rc=$?"; grep -v "^W" "$results/ring-bench.log"
fi
if has python && python3 -c "import torch" 2>/dev/null; then
  install_package
  (cd tests/python && LD_PRELOAD=${PYTEST_PRELOAD:-} timeout 300 python3 -m pytest -q -ra . > "$results/pytest.log" 2>&1)
  rc=$?; echo "pytest rc=$rc"; tail -n 8 "$results/pytest.log"
  # A crash: PYTEST_PRELOAD may name a library that prints the native stack on SIGSEGV.
  [ $rc -ge 2 ] && grep -A30 "native backtrace" "$results/pytest.log" | head -40
  timeout 120 python3 bench/overhead.py --bench-binary "$build/bench/warpflash_bench" > "$results/overhead.log" 2>&1; echo "overhead rc=$?"; tail -n 5 "$results/overhead.log"
fi
if has benchmark && python3 -c "import warpflash" 2>/dev/null; then
  timeout ${BENCHMARK_TIMEOUT:-420} python3 bench/benchmark.py --csv "$results/benchmark.csv" --plot-dir "$results" \
    ${COMMIT:+--commit "$COMMIT"} \
    --title "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F)" > "$results/benchmark.log" 2>&1
  echo "benchmark rc=$?"; grep -E "geomean|^llama" "$results/benchmark.log"
fi
if has backward; then
  timeout 400 "$build/tests/warpflash_gpu_tests" --gtest_brief=1 --gtest_filter='Prepost/*:Backward*' \
    > "$results/backward-tests.log" 2>&1
  echo "backward GPU tests rc=$?"; tail -n 5 "$results/backward-tests.log"
  sanitize backward 'Backward/*bf16_d128_causal_more_queries:Backward/*fp16_d64_gqa_causal:Backward/BackwardVarlenGpu.*'
  timeout 120 "$build/bench/warpflash_bench" --backward --dtypes bf16 --head-dims 64,128 --seqlens 2048,8192,16384 \
    --causal both --iters 20 --warmup 3 > "$results/backward-cpp-bench.log" 2>&1
  echo "backward C++ bench rc=$?"; grep -E "^(bf16|fp16)" "$results/backward-cpp-bench.log"
  if python3 -c "import warpflash" 2>/dev/null; then
    (cd tests/python && timeout 300 python3 -m pytest -q -ra test_backward.py > "$results/pytest-backward.log" 2>&1)
    echo "pytest backward rc=$?"; tail -n 5 "$results/pytest-backward.log"
    timeout 300 python3 bench/backward.py > "$results/backward-bench.log" 2>&1; echo "backward bench rc=$?"
    cat "$results/backward-bench.log"
    timeout 300 python3 examples/train_gpt.py --check > "$results/train_gpt.log" 2>&1; echo "train_gpt rc=$?"
    tail -n 20 "$results/train_gpt.log"
  fi
fi
if has features && python3 -c "import warpflash" 2>/dev/null; then
  timeout ${FEATURES_TIMEOUT:-300} python3 bench/features.py --csv "$results/features.csv" > "$results/features.log" 2>&1
  echo "features rc=$?"; cat "$results/features.log"
  python3 bench/plot_results.py --features "$results/features.csv" --out-dir "$results" > /dev/null 2>&1
fi
