#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from clang-format's output (`make format` fixes it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not installed; skipping"
  exit 0
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null || true)
if ((${#files[@]} == 0)); then
  echo "check-format: no tracked sources (not a git checkout?); skipping"
  exit 0
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
