// The chunks one transfer carries, kept as runs of consecutive chunk indices. Every synthesizer
// sends contiguous ranges (a ring block, a halving-doubling half, a shard), so a list is one or two
// runs however many chunks it names: Halving-Doubling at 4096 ranks sends 2048 chunks in a transfer
// of its first round, and its plan took 137 MB as lists of indices. It reads as the sequence of
// its chunks (iteration, size, operator[]); its runs are there for code that works range by range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace stragglar {

class ChunkList {
 public:
  // Chunks [begin, end), begin < end.
  struct Run {
    int32_t begin = 0;
    int32_t end = 0;
    int32_t size() const { return end - begin; }
    friend bool operator==(const Run&, const Run&) = default;
  };

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const int32_t*;
    using reference = int32_t;

    const_iterator() = default;
    int32_t operator*() const { return chunk_; }
    const_iterator& operator++() {
      if (++chunk_ == run_->end && ++run_ != last_) chunk_ = run_->begin;
      if (run_ == last_) chunk_ = 0;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.run_ == b.run_ && a.chunk_ == b.chunk_;
    }

   private:
    friend class ChunkList;
    const_iterator(const Run* run, const Run* last)
        : run_(run), last_(last), chunk_(run == last ? 0 : run->begin) {}
    const Run* run_ = nullptr;
    const Run* last_ = nullptr;
    int32_t chunk_ = 0;
  };
  using iterator = const_iterator;
  using value_type = int32_t;
  using size_type = size_t;

  ChunkList() = default;
  // Run by run rather than chunk by chunk: the same list, with fewer of GCC 12's false
  // -Wmaybe-uninitialized warnings through InlinedVector in sanitizer builds (40 to 7).
  ChunkList(std::initializer_list<int32_t> chunks) {
    for (const int32_t* chunk = chunks.begin(); chunk != chunks.end();) {
      const int32_t* run_end = chunk + 1;
      while (run_end != chunks.end() && *run_end == *(run_end - 1) + 1) ++run_end;
      AppendRange(*chunk, *(run_end - 1) + 1);
      chunk = run_end;
    }
  }

  // Appends `chunk`, extending the last run when it follows it.
  void push_back(int32_t chunk) { AppendRange(chunk, chunk + 1); }
  // Appends chunks [begin, end); nothing when begin >= end.
  void AppendRange(int32_t begin, int32_t end) {
    if (begin >= end) return;
    if (!runs_.empty() && runs_.back().end == begin) {
      runs_.back().end = end;
    } else {
      runs_.push_back({begin, end});
    }
  }
  void Append(const ChunkList& other) {
    for (const Run& run : other.runs_) AppendRange(run.begin, run.end);
  }

  // The runs, none empty, none starting where the one before it ends.
  absl::Span<const Run> runs() const { return runs_; }
  size_t size() const {
    size_t size = 0;
    for (const Run& run : runs_) size += run.size();
    return size;
  }
  bool empty() const { return runs_.empty(); }
  int32_t front() const { return runs_.front().begin; }
  // The i-th chunk, in time linear in the number of runs.
  int32_t operator[](size_t i) const {
    for (const Run& run : runs_) {
      if (i < static_cast<size_t>(run.size())) return run.begin + static_cast<int32_t>(i);
      i -= run.size();
    }
    return -1;
  }
  const_iterator begin() const { return {runs_.data(), runs_.data() + runs_.size()}; }
  const_iterator end() const {
    const Run* last = runs_.data() + runs_.size();
    return {last, last};
  }

  // Equal chunk sequences have equal runs: runs are maximal.
  friend bool operator==(const ChunkList&, const ChunkList&) = default;

 private:
  // Two runs inline cost no more than a heap pointer and a capacity, so a Transfer stays 40 bytes.
  absl::InlinedVector<Run, 2> runs_;
};

}  // namespace stragglar
