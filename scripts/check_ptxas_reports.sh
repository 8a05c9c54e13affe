#!/usr/bin/env bash
# Checks the ptxas reports of every compiled forward and backward kernel (written by
# cmake/ptxas_report.sh next to the objects): no register spills, no stack (but the bounded
# allowances below), and no "wgmma.mma_async instructions are serialized" warning (C7515),
# which silently costs 20-30% (docs/perf-notes.md). Run by ctest as KernelResources.
#   scripts/check_ptxas_reports.sh BUILD/src EXPECTED_KERNELS
set -uo pipefail
dir=${1:?usage: check_ptxas_reports.sh BUILD/src EXPECTED_KERNELS}
expected=${2:?usage: check_ptxas_reports.sh BUILD/src EXPECTED_KERNELS}
mapfile -t logs < <(find "$dir" \( -name 'forward_*.cu.o.ptxas.log' -o -name 'backward_*.cu.o.ptxas.log' \) | sort)
# Kernels allowed a bounded spill (bytes, as `spilled` below), each for a measured
# reason: the d = 64 backward's softcap branch (128-query tiles) holds tanh's values beside
# S^T, dP^T, dK and dV and stores a few loop values once a tile; its softcap problems run at
# the speed of the spill-free 64-query kernel it replaced (docs/perf-notes.md, 2026-12-04).
declare -A spill_allowance=([backward_bf16_d64]=160 [backward_fp16_d64]=160)
status=0
if [ "${#logs[@]}" -ne "$expected" ]; then
  echo "FAIL: ${#logs[@]} ptxas reports under $dir, expected $expected (rebuild: the reports come from the compile)"
  status=1
fi
for log in "${logs[@]}"; do
  name=$(basename "$log" .cu.o.ptxas.log)
  registers=$(grep -o 'Used [0-9]* registers' "$log" | head -1)
  # The largest of the stack frame, spill stores and spill loads (0 without a report).
  spilled=$(grep -oE '[0-9]+ bytes (stack frame|spill stores|spill loads)' "$log" | grep -oE '^[0-9]+' | sort -n |
            tail -1)
  allowed=${spill_allowance[$name]:-0}
  if ! grep -q 'bytes spill stores' "$log"; then
    echo "FAIL: $name: no resource report in $log (compiled without -Xptxas -v?)"
    status=1
  elif [ "${spilled:-0}" -gt "$allowed" ]; then
    echo "FAIL: $name: $(grep 'bytes spill' "$log" | head -1 | sed 's/^ *//')"
    status=1
  elif grep -q 'C7515' "$log"; then
    echo "FAIL: $name: ptxas serializes the WGMMAs (C7515): an ordinary instruction writes an accumulator while a WGMMA is in flight"
    status=1
  elif [ "$spilled" -gt 0 ]; then
    echo "ok: $name: ${registers:-registers n/a}, $spilled bytes spilled (allowed: $allowed), WGMMAs not serialized"
  else
    echo "ok: $name: ${registers:-registers n/a}, no spills, WGMMAs not serialized"
  fi
done
exit $status
