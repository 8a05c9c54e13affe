#!/usr/bin/env bash
# The Python package once per kernel library, for timing builds against each other without
# reinstalling: builds the extension on the first library (build-stage/libs/NAME.a), then
# links it again against each library into its own copy of the package, /tmp/pkg-NAME
# (put it on PYTHONPATH).
#   scripts/package_per_library.sh LOG_DIR NAME...   (from the repository root)
set -uo pipefail
logs=$1; shift
first=$1
rm -rf build-python
WARPFLASH_PREBUILT_LIB=$PWD/build-stage/libs/$first.a timeout 300 python3 setup.py build_ext -v > $logs/ext.log 2>&1 ||
  { echo ext failed; tail -30 $logs/ext.log; }
so=$(find build-python -name "_C*.so" | head -1); soname=$(basename $so)
link=$(grep -- "-shared" $logs/ext.log | grep -- "$first.a" | tail -1)
for name in "$@"; do
  mkdir -p /tmp/pkg-$name; cp -r python/warpflash /tmp/pkg-$name/
  cmd=${link//build-stage\/libs\/$first.a/build-stage\/libs\/$name.a}
  cmd=${cmd//$PWD\/$so/\/tmp\/pkg-$name\/warpflash\/$soname}
  cmd=${cmd//$so/\/tmp\/pkg-$name\/warpflash\/$soname}
  eval "$cmd" > $logs/link-$name.log 2>&1 || { echo "link $name failed"; tail $logs/link-$name.log; }
done
