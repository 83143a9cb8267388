#!/usr/bin/env bash
# libstragglar.so is invisible to an NCCL program until it has something to add: the same output
# (return codes, NCCL's error messages) with and without the preload, in every mode and with bad
# settings; bad settings get one line each naming the variable; the preload is really loaded.
# Runs without a GPU (NCCL's own errors are then the output to compare).
# usage: BUILD_DIR [LIBRARY]   (LIBRARY: the libstragglar.so to check; default BUILD_DIR's, e.g.
# an installed one)
set -euo pipefail
build_dir=$(realpath "$1")
program=$build_dir/bin/nccl_passthrough_check
library=$(realpath "${2:-$build_dir/lib/libstragglar.so}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_PRELOAD
while read -r variable; do unset "$variable"; done < <(compgen -e STRAGGLAR_ || true)

timeout 120 "$program" >"$work/native.out" 2>"$work/native.err"
grep -q "ncclGetVersion: 0" "$work/native.out" || { cat "$work/native.out"; exit 1; }
if grep -q "libstragglar" "$work/native.err"; then echo "the control run loaded the preload"; exit 1; fi

check() {  # NAME [VAR=VALUE...]: run with the preload and those settings; output must match
  local name=$1
  shift
  env "$@" LD_PRELOAD="$library" timeout 120 "$program" >"$work/$name.out" 2>"$work/$name.err"
  if ! cmp -s "$work/native.out" "$work/$name.out"; then
    echo "FAIL: $name: output differs from NCCL's own"
    diff "$work/native.out" "$work/$name.out" || true
    exit 1
  fi
  grep -q "ncclAllReduce from .*libstragglar.so" "$work/$name.err" ||
    { echo "FAIL: $name: ncclAllReduce is not the preload's"; cat "$work/$name.err"; exit 1; }
  grep -q "ncclSend from .*libstragglar.so" "$work/$name.err" ||
    { echo "FAIL: $name: ncclSend is not the preload's"; cat "$work/$name.err"; exit 1; }
  echo "$name: identical to NCCL's own output"
}
check adapt
check observe STRAGGLAR_MODE=observe
check off STRAGGLAR_MODE=off
check info STRAGGLAR_DEBUG=INFO
check links STRAGGLAR_LINK_PROFILING=on STRAGGLAR_PIPELINE_MICROBATCHES=8 \
  STRAGGLAR_PIPELINE_FORWARD=1ms STRAGGLAR_PIPELINE_BACKWARD=2ms
check links-off STRAGGLAR_LINK_PROFILING=on STRAGGLAR_MODE=off
# The preload's first line says it is active, its version, and the NCCL it found.
grep -m 1 " stragglar " "$work/info.err" |
  grep -Eq "stragglar INFO libstragglar.so [0-9]+\.[0-9]+\.[0-9]+ active over NCCL [0-9]+\.[0-9]+\.[0-9]+: mode adapt" ||
  { echo "FAIL: the first line at INFO is not the preload's banner"; cat "$work/info.err"; exit 1; }
# The MPI library's per-class queues: the NCCL library says it does not run them, once.
check queues STRAGGLAR_QUEUES=per-class
lines=$(grep -c "STRAGGLAR_QUEUES=per-class is the MPI library's; the NCCL library runs plans round by round" "$work/queues.err" || true)
((lines == 1)) || { echo "FAIL: $lines lines for STRAGGLAR_QUEUES, expected 1"; cat "$work/queues.err"; exit 1; }
check bad STRAGGLAR_MODE=fast STRAGGLAR_MIN_BYTES=lots STRAGGLAR_PRE_ARRIVAL=subcomm
grep -q 'STRAGGLAR_MODE="fast" is invalid (accepted: adapt, observe, off); using adapt' \
  "$work/bad.err" || { echo "FAIL: no line for STRAGGLAR_MODE"; cat "$work/bad.err"; exit 1; }
grep -q 'STRAGGLAR_MIN_BYTES="lots" is invalid' "$work/bad.err" ||
  { echo "FAIL: no line for STRAGGLAR_MIN_BYTES"; cat "$work/bad.err"; exit 1; }
grep -q 'STRAGGLAR_PRE_ARRIVAL="subcomm" is invalid (accepted: rounds, nccl); using rounds' \
  "$work/bad.err" || { echo "FAIL: no line for STRAGGLAR_PRE_ARRIVAL"; cat "$work/bad.err"; exit 1; }
lines=$(grep -c "is invalid" "$work/bad.err")
((lines == 3)) || { echo "FAIL: $lines invalid-setting lines, expected 3"; exit 1; }
# The same checks from a module loaded with RTLD_LOCAL: NCCL is then private to the module, as
# PyTorch's is under Python, and RTLD_NEXT cannot find it; the preload must find it all the same.
loader=$build_dir/bin/nccl_local_load_check
module=$build_dir/lib/libnccl_passthrough_module.so
timeout 120 "$loader" "$module" >"$work/local-native.out" 2>"$work/local-native.err" ||
  { echo "FAIL: $loader without the preload"; cat "$work/local-native.err"; exit 1; }
cmp -s "$work/native.out" "$work/local-native.out" ||
  { echo "FAIL: the module's output differs from the program's"; exit 1; }
LD_PRELOAD="$library" timeout 120 "$loader" "$module" >"$work/local.out" 2>"$work/local.err" ||
  { echo "FAIL: $loader with the preload"; cat "$work/local.err"; exit 1; }
if ! cmp -s "$work/native.out" "$work/local.out"; then
  echo "FAIL: NCCL loaded with RTLD_LOCAL: output differs from NCCL's own"
  diff "$work/native.out" "$work/local.out" || true
  cat "$work/local.err"
  exit 1
fi
grep -q "ncclAllReduce from .*libstragglar.so" "$work/local.err" ||
  { echo "FAIL: local: ncclAllReduce is not the preload's"; cat "$work/local.err"; exit 1; }
if grep -q "not found in the process" "$work/local.err"; then
  echo "FAIL: local: the preload did not find the module's NCCL"
  cat "$work/local.err"
  exit 1
fi
echo "local: identical to NCCL's own output with NCCL loaded privately (RTLD_LOCAL)"
cat "$work/native.out"
echo OK
