#!/usr/bin/env bash
# Runs a test command with an emulated cluster up (scripts/cluster.sh), and takes the cluster down
# on every exit path: the command's end, a signal, or this script killed (the cluster's watcher).
# usage: on_cluster.sh NAME SHAPE RATE COMMAND [ARGS...]
# The command finds the cluster's name in RUN_CHECK_CLUSTER (tests/mpi/run_check.sh launches on
# it). Where network namespaces cannot be made, prints the tool's one line and exits 77, which
# the cluster tests take as a skip.
set -uo pipefail
name=$1 shape=$2 rate=$3
shift 3
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
trap '"$cluster" down --name "$name"' EXIT
trap 'exit 143' INT TERM
"$cluster" up "$shape" --name "$name" --rate "$rate" --no-check --owner $$
status=$?
((status == 0)) || exit "$status"
RUN_CHECK_CLUSTER=$name "$@"
