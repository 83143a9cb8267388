#!/usr/bin/env bash
# stragglar-bench from the outside: --help, bad flags (exit 2, one clear line each), and a real
# run with and without libstragglar.so preloaded. Without a GPU the real run must print the SKIP
# line once and exit 77 without hanging; with one it is a tiny run with -c 1 that must find
# nothing wrong. Every assertion says what it checked. usage: BUILD_DIR
set -euo pipefail
build_dir=$(realpath "$1")
bench=$build_dir/bin/stragglar-bench
library=$build_dir/lib/libstragglar.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_PRELOAD
while read -r variable; do unset "$variable"; done < <(compgen -e STRAGGLAR_ || true)

fail() {
  echo "FAIL: $*"
  for file in "$work"/out "$work"/err; do
    [[ -s $file ]] && { echo "--- ${file##*/}"; cat "$file"; }
  done
  exit 1
}

# run EXPECTED_STATUS ARGS...: the bench's status must be EXPECTED_STATUS (a timeout is 124).
run() {
  local expected=$1
  shift
  local status=0
  timeout 90 "$@" >"$work/out" 2>"$work/err" || status=$?
  ((status == expected)) || fail "$* exited with $status, expected $expected"
}

run 0 "$bench" --help
grep -q "^usage: stragglar-bench" "$work/out" || fail "--help prints no usage line"
grep -q -- "-b, --minbytes" "$work/out" || fail "--help does not list -b, --minbytes"
echo "ok: --help prints the usage (nccl-tests flags listed) and exits 0"

# bad_flag MESSAGE ARGS...: exit 2 and exactly one stderr line containing MESSAGE.
bad_flag() {
  local message=$1
  shift
  run 2 "$bench" "$@"
  grep -qF -- "$message" "$work/err" || fail "$*: no \"$message\" on stderr"
  (($(wc -l <"$work/err") == 1)) || fail "$*: expected one line on stderr"
  [[ ! -s $work/out ]] || fail "$*: printed to stdout"
  echo "ok: $* -> exit 2, \"$(cat "$work/err")\""
}
bad_flag 'unknown data type "float33"' -d float33
bad_flag 'unknown data type "foo"' --datatype foo
bad_flag 'unknown reduction "mean"' -o mean
bad_flag 'malformed size "12X"' -b 12X
bad_flag 'malformed size "lots"' --maxbytes=lots
bad_flag '--maxbytes 1024 is smaller than --minbytes 1048576' -b 1M -e 1K
bad_flag '--minbytes 2 does not hold one double (8 bytes)' -b 2 -d double
bad_flag '--straggler 4 is not a rank of 0..3' --ranks 4 --straggler 4 --delay_us 100
bad_flag '--straggler -2 is not a rank' --ranks 4 --straggler -2
bad_flag '--ranks 0 must be >= 1' --ranks 0
bad_flag '--executor gpu is not nccl or device' --executor gpu
bad_flag '--check must be 0 or 1' -c 2
bad_flag 'bad value "abc" for --iters: expected an integer' -n abc
bad_flag 'malformed size "64Q"' --sizes 16M,64Q
bad_flag '--sizes: malformed size' --sizes=1M,,2M
bad_flag '--delay_us_per_mib must be >= 0' --delay_us_per_mib -1
bad_flag 'the delay at the largest size at most 1e7 us' --sizes 1G --delay_us_per_mib 1e5
bad_flag 'unknown flag "--bogus"' --bogus 1
bad_flag 'unexpected argument "extra"' extra

# The real thing: 77 without a GPU (every GPU-less machine, CI included), 0 with one.
args=(--ranks 2 -b 1K -e 64K -f 8 -d 'float,int32' -o 'sum,avg' -c 1 -w 1 -n 2 --timeout_s 80)
status=0
timeout 90 "$bench" "${args[@]}" --json "$work/native.json" >"$work/out" 2>"$work/err" ||
  status=$?
if ((status == 77)); then
  skip_lines=$(grep -c "^SKIP: no CUDA device (" "$work/out" || true)
  ((skip_lines == 1)) || fail "no GPU: expected one SKIP line, got $skip_lines"
  grep -q '"status": "skip"' "$work/native.json" || fail "no GPU: --json does not say skip"
  echo "ok: no GPU: exit 77, one line \"$(cat "$work/out")\", JSON status skip"
  run 77 env LD_PRELOAD="$library" "$bench" "${args[@]}" --json "$work/preload.json"
  skip_lines=$(grep -c "^SKIP: no CUDA device (" "$work/out" || true)
  ((skip_lines == 1)) || fail "no GPU, preload: expected one SKIP line, got $skip_lines"
  grep -q '"active": true' "$work/preload.json" ||
    fail "no GPU, preload: the JSON does not report the preload as active"
  grep -q "libstragglar.so" "$work/preload.json" ||
    fail "no GPU, preload: ncclAllReduce does not come from libstragglar.so"
  echo "ok: no GPU, LD_PRELOAD=libstragglar.so: exit 77, one SKIP line, preload reported active"
  start=$(date +%s)
  run 77 "$bench" --ranks 8 --straggler 3 --delay_us 1000 -c 1
  echo "ok: no GPU, 8 ranks with a straggler: exit 77 after $(($(date +%s) - start)) s, no hang"
  echo OK
  exit 0
fi

# A GPU: the tiny run must have passed its check, without and with the preload.
((status == 0)) || fail "GPU run exited with $status"
grep -q "^# Out of bounds values : 0 OK" "$work/out" || fail "GPU run: #wrong is not 0"
grep -q "^# preload active: no" "$work/out" || fail "GPU run: preload active without LD_PRELOAD"
echo "ok: GPU, no preload: exit 0, #wrong 0"
cat "$work/out"
for algorithm in auto stragglar; do
  run 0 env LD_PRELOAD="$library" STRAGGLAR_ALGORITHM=$algorithm STRAGGLAR_MIN_BYTES=0 \
    "$bench" "${args[@]}"
  grep -q "^# preload active: yes" "$work/out" || fail "GPU run: the preload is not active"
  grep -q "^# Out of bounds values : 0 OK" "$work/out" ||
    fail "GPU run, preload, STRAGGLAR_ALGORITHM=$algorithm: #wrong is not 0"
  echo "ok: GPU, LD_PRELOAD=libstragglar.so STRAGGLAR_ALGORITHM=$algorithm: exit 0, #wrong 0"
done
echo OK
