#!/usr/bin/env bash
# Prepared for the next session: the FP8 tests' relative L2 error over many seeds on the
# long-key cases (the thirty-sixth session's failure: e4m3_d256_block_scales_long_keys at
# seed 2126765887, 0.0237 against the bound 0.0218, on main too). Needs a GPU tests binary
# built from 8700d37 or later (the test records its errors as XML properties):
# BIN=path/to/warpflash_gpu_tests, SEEDS (default 40). Prints per case the largest
# relative L2 error over its P-rounding reference and how often the bound failed.
set -uo pipefail
X=$OUT/seeds; mkdir -p $X
filter='*/e4m3_d*_long_keys:*/e4m3_d*_block_scales_long_keys:*/e4m3_d*_mid_keys_causal_gqa:*/e4m3_d*_long_keys_causal_gqa'
for seed in $(seq ${SEEDS:-40}); do
  WARPFLASH_TEST_SEED=$seed timeout 60 $BIN --gtest_brief=1 --gtest_filter="$filter" --gtest_output=xml:$X/$seed.xml > /dev/null 2>&1
done
python3 - "$X" <<'PY'
import glob, sys, collections, xml.etree.ElementTree as ET
ratios, fails = collections.defaultdict(list), collections.Counter()
for f in glob.glob(sys.argv[1] + "/*.xml"):
    for case in ET.parse(f).iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        for key, rel in props.items():
            if key.endswith("_relative_l2"):
                rel_p = float(props[key + "_p_rounded"])
                ratios[case.get("name")].append(float(rel) / rel_p)
                fails[case.get("name")] += float(rel) > 2 * rel_p + 2 ** -8
for name in sorted(ratios):
    r = sorted(ratios[name])
    print(f"{name}: rel / rel_p median {r[len(r) // 2]:.2f}, max {r[-1]:.2f}, bound failed {fails[name]} of {len(r)}")
PY
tar czf $OUT/seeds.tgz -C $X . && rm -rf $X
