// Sweeps under a sanitizer. scripts/sanitize.sh runs the executors' suites under AddressSanitizer
// and ThreadSanitizer, which check every access at 5-20x the time; there a sweep that repeats one
// code path over many values (every operator, every straggler position) takes a rotating subset
// of them. Every shape still runs, and every value still appears somewhere in the sweep, which
// is what a sanitizer needs to see; the main build runs every combination for the results where
// the shape changes them (the host executor's grid: at the rank counts whose plans differ in
// kind; the device ranks: every straggler position up to 8 ranks).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace stragglar {

// GCC defines __SANITIZE_*__; Clang answers __has_feature.
#if defined(__has_feature)
#define STRAGGLAR_HAS_FEATURE(feature) __has_feature(feature)
#else
#define STRAGGLAR_HAS_FEATURE(feature) 0
#endif

#if defined(__SANITIZE_THREAD__) || STRAGGLAR_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__) || STRAGGLAR_HAS_FEATURE(address_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = kUnderThreadSanitizer;
#endif

// Every value, or under a sanitizer the one at `rotation` (modulo their number). A caller passes
// a rotation that changes with its outer loops, so that each value is still taken by some case.
template <typename T>
std::vector<T> SweepOf(std::span<const T> values, size_t rotation) {
  if (!kUnderSanitizer || values.empty()) return {values.begin(), values.end()};
  return {values[rotation % values.size()]};
}

template <typename T>
std::vector<T> SweepOf(std::initializer_list<T> values, size_t rotation) {
  return SweepOf(std::span<const T>(values.begin(), values.size()), rotation);
}

// Positions 0 to n-1, or under a sanitizer the first, the middle and the last.
inline std::vector<int> PositionsOf(int n) {
  std::vector<int> positions;
  for (int position = 0; position < n; ++position) {
    if (!kUnderSanitizer || position == 0 || position == n / 2 || position == n - 1) {
      positions.push_back(position);
    }
  }
  return positions;
}

}  // namespace stragglar
