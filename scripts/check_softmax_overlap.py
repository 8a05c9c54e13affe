#!/usr/bin/env python3
"""Checks in SASS that the forward kernels still overlap the softmax with the PV GEMM
(FlashAttention-3's intra-warpgroup overlap): in the main loop, the exponentials (MUFU.EX2)
must lie between the wait for S (WARPGROUP.DEPBAR.LE gsb0, 0x1) and the wait for
O += P V (gsb0, 0x0). ptxas once moved the second wait above the softmax in every kernel
without a warning (docs/perf-notes.md, twenty-fifth session); traits.h's
kSoftmaxBeforePvWait keeps it below for BF16/FP16 at head dims >= 128, which this checks.

    cuobjdump --dump-sass build/bench/warpflash_bench > sass.txt
    scripts/check_softmax_overlap.py sass.txt

Prints one line per forward kernel; exits 1 if a kernel that should overlap does not.
"""
import re
import sys

KERNEL = re.compile(r"Function : (\S*forward_kernel\S*)")
TRAITS = re.compile(r"ForwardTraitsIN7cutlass(\d+)(\w+?)ELi(\d+)ELi(\d+)ELNS0_14ForwardVariantE(\d+)E")
INSTRUCTION = re.compile(r"/\*[0-9a-f]+\*/\s+([^;]*);")


def exponentials_between_waits(instructions):
    """MUFU.EX2 count between each wait for S and the next wait for PV, the largest."""
    best = 0
    for i, text in enumerate(instructions):
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in text:
            continue
        for j in range(i + 1, len(instructions)):
            if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in instructions[j]:
                best = max(best, sum("MUFU.EX2" in t for t in instructions[i:j]))
                break
    return best


def main(path):
    kernels = []  # (mangled name, instructions)
    for line in open(path, errors="replace"):
        match = KERNEL.search(line)
        if match:
            kernels.append((match.group(1), []))
            continue
        match = INSTRUCTION.search(line)
        if match and kernels:
            kernels[-1][1].append(match.group(1))
    failures = 0
    for name, instructions in kernels:
        traits = TRAITS.search(name)
        if traits is None:
            continue
        dtype, head_dim = traits.group(2), int(traits.group(3))
        expected = "e4m3" not in dtype and head_dim >= 128
        count = exponentials_between_waits(instructions)
        ok = count > 0 or not expected
        failures += not ok
        loop = "general" if "AttentionMask" in name else "plain"
        print(f"{'ok' if ok else 'FAIL'}: {dtype} d{head_dim} variant {traits.group(5)} {loop} loop: {count}"
              f" exponentials between the waits"
              f" ({'expected' if expected else 'not expected'})")
    if not any(TRAITS.search(name) for name, _ in kernels):
        print("no forward kernels found")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
