#!/usr/bin/env bash
# Compiler launcher of the CUDA kernels: ptxas_report.sh SHOW COMMAND...
# Runs the compile (COMMAND may start with ccache, which replays a cached compile's
# output) and keeps ptxas's resource report (-Xptxas -v: registers, spills, serialized
# WGMMA warnings) next to the object as <object>.ptxas.log, for the test that checks it
# (scripts/check_ptxas_reports.sh). The report reaches the console only when SHOW is ON.
show=$1
shift
object=""
previous=""
for arg in "$@"; do
  [ "$previous" = "-o" ] && object=$arg
  previous=$arg
done
log=${object:-/dev/null}.ptxas.log
[ -z "$object" ] && log=$(mktemp)
"$@" 2> "$log.tmp"
status=$?
if [ "$show" = ON ]; then
  cat "$log.tmp" >&2
else
  grep -v -e '^ptxas info' -e 'bytes stack frame' "$log.tmp" >&2
fi
mv "$log.tmp" "$log"
exit $status
