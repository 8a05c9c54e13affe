#!/usr/bin/env bash
# The test command: set-up, build, and every test. Without a Hopper GPU the GPU tests
# report themselves skipped; on one they run against the CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh "$@"
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
