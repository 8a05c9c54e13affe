#!/usr/bin/env bash
# Thirty-seventh session, call C (carry stage-38.txz, FA3's wheel): per-instruction stall
# samples (ncu SourceCounters, SASS) of causal d = 128 BF16 at 8k, ours (N) and FA3's, so the
# next session can see at which instructions each kernel's warps wait.
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/rc; mkdir -p $R
save() { tar czf $OUT/c.tgz -C $R --exclude="*.ncu-rep" .; }
tar xJf build-carry/stage-38.txz
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fa3_fwd-*.whl > /dev/null 2>&1
scripts/package_per_library.sh $R N > $R/package.log 2>&1; echo "package rc=$?"
for impl in warpflash fa3; do
  (cd bench && PYTHONPATH=/tmp/pkg-N:/tmp/site timeout 90 ncu --clock-control none \
    --kernel-name regex:'forward_kernel|device_kernel' --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o $R/$impl-8192 \
    python3 fp8_profile.py $impl 128 1 8192 bf16) > $R/$impl-8192.log 2>&1
  echo "ncu $impl rc=$? at ${SECONDS}s"
  timeout 60 ncu -i $R/$impl-8192.ncu-rep --page source --print-source sass --csv > $R/$impl-8192-sass.csv 2> $R/$impl-8192-sass.err
  echo "source page rc=$? lines $(wc -l < $R/$impl-8192-sass.csv)"; head -c 600 $R/$impl-8192-sass.csv; echo; head -3 $R/$impl-8192-sass.err
  save
done
save
tar czf $OUT/reps.tgz -C $R $(cd $R && ls *.ncu-rep) 2>/dev/null; ls -la $OUT
