#!/usr/bin/env bash
# Call 5 (carry build-carry/s45f.txz and build-carry/cu13.partaa; a fresh machine after call
# 4 found FA4's wheel set one short, nvidia-cutlass-dsl-libs-core, now in fa4w/): the package
# on F's library into /tmp/pkg-F and the first cu13 half into /tmp; then call4.sh again.
set -uo pipefail
R=/tmp/r5; mkdir -p $R
cp build-carry/cu13.partaa /tmp/
tar xJf build-carry/s45f.txz
mkdir -p build-stage/libs; cp build-stage/F/src/libwarpflash.a build-stage/libs/F.a
scripts/package_per_library.sh $R F > $R/package.log 2>&1; echo "package rc=$? at ${SECONDS}s"; ls /tmp/pkg-F/warpflash | head -3
