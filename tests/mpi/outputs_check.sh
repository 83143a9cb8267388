#!/usr/bin/env bash
# The MPI preload library's outputs: STRAGGLAR_TRACE_FILE (CSV, then Perfetto JSON) and
# STRAGGLAR_SUMMARY_FILE from a real 4-process run; the CSV must replay through
# `stragglar replay` (the contract's reader), the JSON files must parse with the expected fields.
# usage: outputs_check.sh BUILD_DIR
set -euo pipefail
build_dir=$(realpath "$1")
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_MIN_BYTES=0 STRAGGLAR_EPOCH_CALLS=8 \
    STRAGGLAR_SUMMARY_FILE="$work/summary.json" STRAGGLAR_TRACE_FILE="$1" STRAGGLAR_DEBUG=INFO \
    "$here/run_check.sh" "$build_dir" 4 yes "$build_dir/bin/mpi_allreduce_check" --expect-preload \
    >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
}
run "$work/trace.csv"
grep -q "world: late ranks" "$work/log" || { echo "no lag summary in the log"; cat "$work/log"; exit 1; }
head -1 "$work/trace.csv" | grep -qx "call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,link_send_bytes_per_s,link_receive_bytes_per_s"
rows=$(($(wc -l <"$work/trace.csv") - 1))
# Every call of the world communicator, 4 rows each (the last, partial epoch is flushed at
# MPI_Finalize).
((rows > 0 && rows % 4 == 0)) || { echo "trace has $rows rows"; exit 1; }
"$build_dir/bin/stragglar" replay --trace "$work/trace.csv" --epoch-calls 8 --json >"$work/replay.json"
python3 - "$work" "$rows" <<'PY'
import json, sys
work, rows = sys.argv[1], int(sys.argv[2])
replay = json.load(open(f"{work}/replay.json"))
assert replay["ranks"] == 4 and replay["calls"] == rows // 4, replay
# Every row carries its rank's link as the preload priced it (probed at MPI_Init): one machine,
# every link alike, so the replay names none slow.
links = [float(line.split(",")[6]) for line in open(f"{work}/trace.csv").read().split("\n")[1:] if line]
assert len(links) == rows and min(links) > 0 and min(links) == max(links), links[:8]
assert replay["link_column"] is True and replay["slow_links"] == [], replay["slow_links"]
summary = json.load(open(f"{work}/summary.json"))
assert summary["comm"] == "world" and summary["calls"] == rows // 4, summary
assert [r["rank"] for r in summary["per_rank"]] == [0, 1, 2, 3], summary
for key in ("lag_s", "waited_s", "last_fraction"):
    assert key in summary["per_rank"][0], key
print(f"trace: {rows} rows replayed; summary: {summary['calls']} calls")
PY
run "$work/trace.json"
python3 - "$work" <<'PY'
import json, sys
trace = json.load(open(f"{sys.argv[1]}/trace.json"))
tracks = {e["tid"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
slices = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "collective"]
assert tracks == {0, 1, 2, 3}, tracks
assert slices and all(e["args"]["algorithm"] == "stragglar" for e in slices), slices[:2]
print(f"perfetto: {len(slices)} slices on {len(tracks)} tracks")
PY

# STRAGGLAR_STATE_FILE: saved by rank 0 at MPI_Finalize; the next job reads it on rank 0 and
# broadcasts it (one "loaded" line, from rank 0 only); a corrupt file is one line and a fresh start.
state_run() {
  STRAGGLAR_STATE_FILE="$work/state.json" STRAGGLAR_MIN_BYTES=0 STRAGGLAR_EPOCH_CALLS=8 \
    STRAGGLAR_DEBUG=INFO "$here/run_check.sh" "$build_dir" 4 yes \
    "$build_dir/bin/mpi_allreduce_check" --expect-preload >"$work/log" 2>&1 ||
    { cat "$work/log"; exit 1; }
}
state_run
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['ranks'] == 4, s; \
assert s['machine'].endswith('/mpi'), s" "$work/state.json"
state_run
loaded=$(grep -c "loaded the learned state" "$work/log" || true)
((loaded == 1)) || { echo "FAIL: $loaded 'loaded' lines, expected 1 (rank 0)"; cat "$work/log"; exit 1; }
grep -q "\[0\] stragglar INFO loaded the learned state" "$work/log" ||
  { echo "FAIL: the state was not loaded by rank 0"; cat "$work/log"; exit 1; }
echo "{ truncated" >"$work/state.json"
state_run
grep -q "is corrupt: not valid JSON; starting fresh" "$work/log" ||
  { echo "FAIL: no line for the corrupt state file"; cat "$work/log"; exit 1; }
grep -q "0 mismatches" "$work/log" || { cat "$work/log"; exit 1; }
echo "state file: saved, loaded once and broadcast, corrupt file refused"
echo OK
