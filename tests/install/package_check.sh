#!/usr/bin/env bash
# The Debian packages: `cpack -G DEB` from the build, then for each package its metadata and
# contents (dpkg-deb), lintian with no error, and the files unpacked into a scratch root
# (dpkg -x) running from there: `stragglar --version`, and the doctor finding the preloads.
# usage: package_check.sh BUILD_DIR VERSION
# Exit codes: 0 pass, 1 fail, 77 skipped (lintian missing: Debian package lintian).
set -euo pipefail
(($# == 2)) || { echo "usage: $0 BUILD_DIR VERSION" >&2; exit 2; }
build_dir=$(realpath "$1")
version=$2
fail() { echo "package_check: FAIL: $*" >&2; exit 1; }
command -v lintian >/dev/null ||
  { echo "package_check: SKIPPED: lintian not found (Debian package lintian)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$work" && cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
arch=$(dpkg --print-architecture)
core=$work/out/stragglar_${version}_$arch.deb
[[ -f $core ]] || { ls "$work/out"; fail "no $core"; }

field() { dpkg-deb -f "$1" "$2"; }
contents() { dpkg-deb -c "$1" | awk '{print $6}'; }
has() {  # DEB PATH...: each path is in the package
  local deb=$1
  shift
  for path in "$@"; do
    contents "$deb" | grep -qx "$path" || { contents "$deb"; fail "$(basename "$deb") lacks $path"; }
  done
}

# stragglar: the CLI, the NCCL preload (when built), the dashboards and docs; Depends from the
# libraries it links (Abseil, prometheus-cpp), never on NCCL or CUDA.
[[ $(field "$core" Package) == stragglar && $(field "$core" Version) == "$version" ]] ||
  fail "stragglar's Package/Version: $(field "$core" Package) $(field "$core" Version)"
depends=$(field "$core" Depends)
for library in libabsl libprometheus-cpp-core libprometheus-cpp-pull libc6 libstdc++6; do
  [[ $depends == *"$library"* ]] || fail "stragglar's Depends lacks $library: $depends"
done
[[ $depends != *nccl* && $depends != *cuda* && $depends != *mpi* ]] ||
  fail "stragglar depends on NCCL, CUDA or MPI: $depends"
has "$core" ./usr/bin/stragglar ./usr/share/stragglar/dashboards/stragglar-dashboard.json \
  ./usr/share/stragglar/dashboards/stragglar-rules.yml ./usr/share/doc/stragglar/copyright \
  ./usr/share/doc/stragglar/changelog.gz
[[ -f $build_dir/lib/libstragglar.so ]] && has "$core" ./usr/lib/stragglar/libstragglar.so
packages=("$core")
echo "stragglar: Depends: $depends"

# stragglar-mpi: the MPI preload; Depends on the MPI library it links.
if [[ -f $build_dir/lib/libstragglar_mpi.so ]]; then
  deb=$work/out/stragglar-mpi_${version}_$arch.deb
  [[ -f $deb ]] || { ls "$work/out"; fail "no $deb"; }
  [[ $(field "$deb" Depends) == *libopenmpi* ]] ||
    fail "stragglar-mpi's Depends lacks OpenMPI: $(field "$deb" Depends)"
  has "$deb" ./usr/lib/stragglar/libstragglar_mpi.so ./usr/share/doc/stragglar-mpi/copyright
  packages+=("$deb")
  echo "stragglar-mpi: Depends: $(field "$deb" Depends)"
fi
# stragglar-bench: links NCCL and the CUDA runtime, which Debian does not package: recommended
# under NVIDIA's names, not depended on.
if [[ -f $build_dir/bin/stragglar-bench ]]; then
  deb=$work/out/stragglar-bench_${version}_$arch.deb
  [[ -f $deb ]] || { ls "$work/out"; fail "no $deb"; }
  [[ $(field "$deb" Recommends) == *"libnccl2 (>= 2.28)"* ]] ||
    fail "stragglar-bench does not recommend libnccl2: $(field "$deb" Recommends)"
  [[ $(field "$deb" Depends) != *nccl* ]] || fail "stragglar-bench depends on NCCL"
  has "$deb" ./usr/bin/stragglar-bench
  packages+=("$deb")
  echo "stragglar-bench: Recommends: $(field "$deb" Recommends)"
fi

# lintian: no error in any package (warnings are printed, not fatal).
for deb in "${packages[@]}"; do
  lintian --fail-on error --tag-display-limit 0 "$deb" >"$work/lintian.out" 2>&1 ||
    { cat "$work/lintian.out"; fail "lintian reports errors in $(basename "$deb")"; }
  echo "lintian $(basename "$deb"): no error ($(grep -c '^W:' "$work/lintian.out" || true) warnings)"
done

# Unpacked into a scratch root: the programs run from there, and find the preloads next to them.
root=$work/root
for deb in "${packages[@]}"; do dpkg -x "$deb" "$root"; done
[[ $(env -i PATH=/usr/bin:/bin "$root/usr/bin/stragglar" --version) == "stragglar $version" ]] ||
  fail "the unpacked stragglar --version"
for file in "$root"/usr/bin/* "$root"/usr/lib/stragglar/*; do
  if readelf -d "$file" | grep -qE "RPATH|RUNPATH"; then fail "$file has a RUNPATH"; fi
  if file "$file" | grep -q "not stripped"; then fail "$file is not stripped"; fi
done
env -i PATH=/usr/bin:/bin "$root/usr/bin/stragglar" doctor >"$work/doctor.out" 2>&1 || true
if [[ -f $build_dir/lib/libstragglar_mpi.so ]]; then
  grep -q "^\[ok\]   preload mpi: $root/usr/lib/stragglar/libstragglar_mpi.so loads$" "$work/doctor.out" ||
    { cat "$work/doctor.out"; fail "the unpacked doctor does not find the MPI preload"; }
fi
echo "unpacked: stragglar --version runs; no RUNPATH; stripped; the doctor finds the preloads"
echo OK
