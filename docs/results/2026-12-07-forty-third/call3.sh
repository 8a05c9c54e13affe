#!/usr/bin/env bash
# Call 3, right after calls 1 and 2 on the same warm machine (carry build-carry/cu13.partab and
# build-carry/fa4w/: FA4 b36 and its other wheels): FA4 installed into /tmp/site, then
# bench/backward.py with warpflash (main, /tmp/pkg-D from call 1; /tmp/cu13.partaa from call 2), cuDNN and FA4 interleaved,
# d = 64 / 128 / 256 BF16 with the Llama step; then Nsight Compute of both backward kernels at
# d = 64 16k non-causal and 1k causal (the forty-first's study: where FA4's d = 64 lead comes from).
set -uo pipefail
export PYTHONUNBUFFERED=1
R=/tmp/r3; mkdir -p $R
save() { tar czf $OUT/r3.tgz -C $R .; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt; cat $R/gpu.txt
[ -d /tmp/pkg-D ] && [ -f /tmp/cu13.partaa ] || { echo "not the warm machine of calls 1 and 2"; ls /tmp; exit 3; }
mkdir -p /tmp/site
# the libraries after pip: pip --target --upgrade replaces the nvidia_cutlass_dsl folder
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build-carry/fa4w/*.whl > $R/pip.log 2>&1; echo "pip rc=$?"
cat /tmp/cu13.partaa build-carry/cu13.partab | tar xJf - -C /tmp/site || { echo "cu13 unpack failed"; exit 4; }
# the DSL's .pth would put dsl_packages on the path in a normal install
export PYTHONPATH=/tmp/pkg-D:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
echo "PYTHONPATH=$PYTHONPATH"
python3 -c "from flash_attn.cute import interface; print('fa4 ok')" > $R/fa4-import.log 2>&1; cat $R/fa4-import.log | tail -3
(timeout 330 python3 bench/backward.py --head-dims 64,128,256 --dtypes bf16 --repeats 3 > $R/backward-py-fa4.log 2>&1); echo "backward.py rc=$? at ${SECONDS}s"
cat $R/backward-py-fa4.log; save
prof() {  # prof TAG IMPL HEAD_DIM CAUSAL SEQLEN
  (cd bench && timeout 120 ncu --clock-control none --kernel-name regex:'backward_kernel|Backward' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
    --export $R/$1 python3 backward_profile.py $2 $3 $4 $5 > $R/$1.log 2>&1)
  echo "prof $1 rc=$? at ${SECONDS}s"
  ncu --import $R/$1.ncu-rep --page details --print-details all > $R/$1-details.txt 2>&1
  ncu --import $R/$1.ncu-rep --page source --print-source sass --csv > $R/$1-sass.csv 2>&1
  grep -E "Duration|Issued Warp|No Eligible|Registers Per|Kernel Name|^  [A-Za-z_]+Backward|backward_kernel" $R/$1-details.txt | head -8; save
}
prof fa4-d64-16k fa4 64 0 16384
prof wf-d64-16k warpflash 64 0 16384
prof fa4-d64-1k-causal fa4 64 1 1024
prof wf-d64-1k-causal warpflash 64 1 1024
echo "done at ${SECONDS}s"
