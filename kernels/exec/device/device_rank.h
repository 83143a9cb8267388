// One rank's part of a device-resident AllReduce call: the control code of the device executor's
// kernel (kernels/program/device_program.h says what it runs). It is written once for two
// platforms:
//   - the GPU (kernels/exec/device/device_kernel.cu): a platform is one CTA; its waits poll with
//     acquire loads and its posts are release stores, both at the call's DeviceSignalScope, its
//     copies and reductions spread over the CTA's threads;
//   - the CPU (tests/kernels/device_rank_test.cc): a platform is one thread, ranks are threads over
//     shared memory, so CI runs every path of this file against the host executor, bit for bit.
//
// A call may be larger than a window: it runs as slices (DeviceWindowLayout), the whole program
// once per slice. Each slice has its own sequence number, carried in the high half of every
// signal (the low half counts transfers), so a signal left from an earlier slice or call never
// satisfies a wait of a later one. Every chunk's elements are split among the `ctas` platforms
// of a rank the same way on every rank, and CTA b only ever signals and waits for CTA b of
// its peers: CTAs never wait for each other.
//
// A Platform provides (all of it STRAGGLAR_HOST_DEVICE, called by every thread of the CTA):
//   // Until CheckSignal(*signal, awaited) is kReached; false: gave up (out of step, aborted,
//   // timed out), recorded for the host.
//   bool Wait(uint64_t* signal, uint64_t awaited, int32_t peer);
//   void Post(uint64_t* signal, uint64_t value);  // after every write before it is visible
//   void Sync();     // every thread's memory accesses so far are done (a CTA barrier)
//   bool Stopped();  // an earlier launch of this rank gave up, or the host aborted
//   void Copy(Storage* out, const Storage* in, int64_t elements);
//   template <typename Op> void Reduce(Storage* out, const Storage* first, const Storage* second,
//                                      int64_t elements);  // out may equal first
//   void Divide(Storage* out, const Storage* in, int64_t elements, int divisor);
//   static constexpr DeviceFault kFault;  // kNone outside the tests' planted bugs
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/exec/device/device_stamps.h"
#include "kernels/exec/device/device_watch.h"
#include "kernels/program/device_program.h"
#include "kernels/reduce/reduce_element.h"

namespace stragglar {

// Bugs the CPU tests plant to show that they would catch them. Real platforms use kNone, which
// compiles every other branch away.
enum class DeviceFault : uint8_t {
  kNone,
  kSkipReadyWait,      // pull a peer's chunks without waiting for its ready signal
  kReadyBeforeWrites,  // post a step's ready before the previous step's writes
  kStaleSequence,      // wait for the previous slice's signals
  kSkipLoanWaits,      // overwrite lent chunks without waiting for their readers
};

// The program's arrays, wherever they live (device memory on the GPU).
struct DeviceProgramView {
  int32_t rank = 0;
  int32_t num_ranks = 0;
  int32_t num_chunks = 0;
  int32_t num_steps = 0;
  int32_t num_drain = 0;
  const DeviceStep* steps = nullptr;
  const DeviceExtent* extents = nullptr;
  const DeviceReadWait* waits = nullptr;
  const DeviceReadWait* drain = nullptr;
  const uint8_t* chunk_flags = nullptr;  // num_chunks DeviceChunkFlag bytes
};

inline DeviceProgramView ViewOf(const DeviceProgram& program) {
  return {.rank = program.rank,
          .num_ranks = program.num_ranks,
          .num_chunks = program.num_chunks,
          .num_steps = static_cast<int32_t>(program.steps.size()),
          .num_drain = static_cast<int32_t>(program.drain.size()),
          .steps = program.steps.data(),
          .extents = program.extents.data(),
          .waits = program.waits.data(),
          .drain = program.drain.data(),
          .chunk_flags = program.chunk_flags.data()};
}

// How far a post's release and a wait's acquire reach. A release at system scope makes the
// writes before it visible to the host and every GPU before the signal; that is needed only when
// a peer's window is on another GPU (over NVLink or PCIe). Ranks that share one GPU (under MPS)
// read each other's windows through that GPU's memory, which a GPU-scope release orders, at a
// fraction of the cost (scripts/gpu-check.sh --only rounds measures both).
// PeerWindows::signal_scope says which a communicator needs.
enum class DeviceSignalScope : uint8_t { kSystem, kGpu };

// What one call of one rank touches.
struct DeviceCall {
  // Every rank's window, as mapped here (windows[rank] is this rank's own): window_elements
  // elements each (at least the plan's chunk count), 16-byte aligned.
  std::byte* const* windows = nullptr;
  // Every rank's signal array, as mapped here: DeviceSignalSlots(ctas, num_ranks) words each,
  // zero before the first call.
  uint64_t* const* signals = nullptr;
  std::byte* scratch = nullptr;  // this rank's, window_elements elements, seen by nobody else
  const std::byte* input = nullptr;
  std::byte* result = nullptr;    // may equal input
  int64_t count = 0;              // elements per rank, the same on every rank
  int64_t window_elements = 0;    // > 0
  uint32_t first_sequence = 1;    // the first slice's; the caller adds the slices per call
  int32_t num_ranks_divisor = 0;  // kAvg's divisor (the rank count); 0 for other operators
  // This call's slot of the kernel's timeline (kernels/exec/device/device_stamps.h), host-mapped;
  // null when none is kept. Only the GPU's kernel writes it.
  DeviceStamps* stamps = nullptr;
  DeviceSignalScope scope = DeviceSignalScope::kSystem;  // the same for every call of a rank
};

inline constexpr int32_t DeviceSignalSlots(int32_t ctas, int32_t num_ranks) {
  return 2 * ctas * num_ranks;
}

// How a call's chunks map onto a window. The window holds a region of `region` elements per
// chunk, and slice s carries elements [s * region, (s + 1) * region) of every chunk. Chunks are
// the whole call's (ChunkElements of its count), so every element is reduced in the plan's order
// whatever the window's size: results equal the host executor's. Within a region, CTA b of
// `ctas` always owns the same positions, cut at 16-byte multiples: a CTA never touches what
// another CTA of its rank may still be reading or writing in an earlier slice.
struct DeviceWindowLayout {
  int64_t region = 0;  // elements per chunk per slice; 0 when the window cannot hold a slice
  int64_t slices = 0;
};

STRAGGLAR_HOST_DEVICE int64_t DeviceAlignElements(int64_t element_size) {
  return element_size >= 16 ? 1 : 16 / element_size;
}

// window_elements >= num_chunks gives every chunk a region; the caller advances
// DeviceCall::first_sequence by `slices` per call.
STRAGGLAR_HOST_DEVICE DeviceWindowLayout DeviceLayoutOf(int64_t count, int32_t num_chunks,
                                                        int64_t window_elements,
                                                        int64_t element_size) {
  const int64_t align = DeviceAlignElements(element_size);
  int64_t region = window_elements / num_chunks;
  if (region >= align) region = region / align * align;
  const int64_t largest_chunk = (count + num_chunks - 1) / num_chunks;
  if (region <= 0 || count <= 0) return {.region = region, .slices = 0};
  return {.region = region, .slices = (largest_chunk + region - 1) / region};
}

namespace device_rank {

// ready[cta][sender] and read[cta][reader] of a rank's signal array.
STRAGGLAR_HOST_DEVICE uint64_t* ReadySlot(uint64_t* signals, int32_t cta, int32_t num_ranks,
                                          int32_t sender) {
  return signals + static_cast<int64_t>(cta) * num_ranks + sender;
}
STRAGGLAR_HOST_DEVICE uint64_t* ReadSlot(uint64_t* signals, int32_t cta, int32_t ctas,
                                         int32_t num_ranks, int32_t reader) {
  return signals + static_cast<int64_t>(ctas + cta) * num_ranks + reader;
}

// The elements of one chunk that one CTA moves in one slice.
struct Part {
  int64_t message = 0;  // first element in the caller's buffers
  int64_t window = 0;   // first element in the window
  int64_t elements = 0;
};
STRAGGLAR_HOST_DEVICE Part PartOf(int64_t count, int32_t num_chunks, int32_t chunk,
                                  const DeviceWindowLayout& layout, int64_t slice, int32_t cta,
                                  int32_t ctas, int64_t align) {
  const int64_t chunk_begin = count * chunk / num_chunks;
  const int64_t chunk_size = count * (chunk + 1) / num_chunks - chunk_begin;
  auto cut = [&](int32_t b) {
    return b == ctas ? layout.region : layout.region * b / ctas / align * align;
  };
  const int64_t first = slice * layout.region + cut(cta);
  int64_t last = slice * layout.region + cut(cta + 1);
  if (last > chunk_size) last = chunk_size;
  return {.message = chunk_begin + first,
          .window = chunk * layout.region + cut(cta),
          .elements = last > first ? last - first : 0};
}

// One slice of one call for one CTA.
template <typename Codec, typename Op, typename Platform>
class SliceRun {
 public:
  using Storage = typename Codec::Storage;

  STRAGGLAR_HOST_DEVICE SliceRun(Platform& platform, const DeviceProgramView& program,
                                 const DeviceCall& call, const DeviceWindowLayout& layout,
                                 int64_t slice, int32_t cta, int32_t ctas)
      : platform_(platform),
        program_(program),
        call_(call),
        layout_(layout),
        slice_(slice),
        cta_(cta),
        ctas_(ctas),
        sequence_(call.first_sequence + static_cast<uint32_t>(slice)),
        wait_sequence_(sequence_ - (Platform::kFault == DeviceFault::kStaleSequence ? 1 : 0)) {}

  // False when a wait gave up; the chunks whose last write came before are in the result.
  STRAGGLAR_HOST_DEVICE bool Run() {
    Storage* const mine = Window(program_.rank);
    const Storage* const input = reinterpret_cast<const Storage*>(call_.input);
    // The copies spread elements over threads by the buffers' alignment, which may differ from
    // the last slice's result copy: that copy must be done reading before this one writes.
    platform_.Sync();
    ForEachPart(0, program_.num_chunks, kDeviceCopyIn, [&](const Part& part) {
      platform_.Copy(mine + part.window, input + part.message, part.elements);
    });
    for (int32_t index = 0; index < program_.num_steps; ++index) {
      const DeviceStep& step = program_.steps[index];
      if constexpr (Platform::kFault == DeviceFault::kReadyBeforeWrites) {
        if (index + 1 < program_.num_steps) PostReady(program_.steps[index + 1]);
        if (index == 0) PostReady(step);
      } else {
        PostReady(step);
      }
      if (step.receive_peer >= 0 && !Receive(step)) return false;
    }
    for (int32_t i = 0; i < program_.num_drain; ++i) {
      if (!WaitForReads(program_.drain[i])) return false;
    }
    platform_.Sync();  // the last writes into the window (by other threads) are done
    Storage* const result = Result();
    const bool averages = call_.num_ranks_divisor > 0;
    // Averaged, to_result extents landed in the window too: the division comes here.
    const uint8_t from_window = averages ? kDeviceEndWindow | kDeviceEndResult : kDeviceEndWindow;
    ForEachPart(0, program_.num_chunks, from_window, [&](const Part& part) {
      Finish(result + part.message, mine + part.window, part.elements);
    });
    if (averages || call_.input != call_.result) {
      ForEachPart(0, program_.num_chunks, kDeviceEndInput, [&](const Part& part) {
        Finish(result + part.message, input + part.message, part.elements);
      });
    }
    return true;
  }

 private:
  STRAGGLAR_HOST_DEVICE Storage* Window(int32_t rank) const {
    return reinterpret_cast<Storage*>(call_.windows[rank]);
  }
  STRAGGLAR_HOST_DEVICE Storage* Result() const { return reinterpret_cast<Storage*>(call_.result); }
  // The end of a chunk's part: copied to the result, or divided into it when averaging.
  STRAGGLAR_HOST_DEVICE void Finish(Storage* out, const Storage* in, int64_t elements) {
    if (call_.num_ranks_divisor > 0) {
      platform_.Divide(out, in, elements, call_.num_ranks_divisor);
    } else {
      platform_.Copy(out, in, elements);
    }
  }
  // `function(part)` for this CTA's part of chunks [first_chunk, first_chunk + num_chunks) in
  // this slice; only of chunks with one of the `flags` (DeviceChunkFlag) when given.
  template <typename Function>
  STRAGGLAR_HOST_DEVICE void ForEachPart(int32_t first_chunk, int32_t num_chunks, uint8_t flags,
                                         Function function) const {
    for (int32_t chunk = first_chunk; chunk < first_chunk + num_chunks; ++chunk) {
      if ((program_.chunk_flags[chunk] & flags) != 0) ForEachPart(chunk, 1, function);
    }
  }
  template <typename Function>
  STRAGGLAR_HOST_DEVICE void ForEachPart(int32_t first_chunk, int32_t num_chunks,
                                         Function function) const {
    for (int32_t chunk = first_chunk; chunk < first_chunk + num_chunks; ++chunk) {
      const Part part = PartOf(call_.count, program_.num_chunks, chunk, layout_, slice_, cta_,
                               ctas_, DeviceAlignElements(sizeof(Storage)));
      if (part.elements > 0) function(part);
    }
  }

  STRAGGLAR_HOST_DEVICE void PostReady(const DeviceStep& step) {
    if (step.send_peer < 0) return;
    platform_.Post(
        ReadySlot(call_.signals[step.send_peer], cta_, program_.num_ranks, program_.rank),
        DeviceSignal(sequence_, step.sends));
  }
  STRAGGLAR_HOST_DEVICE bool WaitForReads(const DeviceReadWait& wait) {
    return platform_.Wait(
        ReadSlot(call_.signals[program_.rank], cta_, ctas_, program_.num_ranks, wait.reader),
        DeviceSignal(wait_sequence_, wait.reads), wait.reader);
  }
  STRAGGLAR_HOST_DEVICE bool WaitForLoans(const DeviceExtent& extent) {
    if constexpr (Platform::kFault == DeviceFault::kSkipLoanWaits) return true;
    for (int32_t w = extent.first_wait; w < extent.first_wait + extent.num_waits; ++w) {
      if (!WaitForReads(program_.waits[w])) return false;
    }
    return true;
  }

  // Where a received part lands: the result for a chunk's last write that nothing lends later
  // (unless the call averages: the division reads the window at the end), else the window.
  STRAGGLAR_HOST_DEVICE Storage* Landing(const DeviceExtent& extent, const Part& part) const {
    if (extent.to_result && call_.num_ranks_divisor == 0) return Result() + part.message;
    return Window(program_.rank) + part.window;
  }

  // Pulls the step's chunks from the sender's window and lands them (Landing), through scratch
  // for chunks this step also lends (the peer reads them while this rank reads its).
  STRAGGLAR_HOST_DEVICE bool Receive(const DeviceStep& step) {
    const int32_t peer = step.receive_peer;
    if (Platform::kFault != DeviceFault::kSkipReadyWait &&
        !platform_.Wait(ReadySlot(call_.signals[program_.rank], cta_, program_.num_ranks, peer),
                        DeviceSignal(wait_sequence_, step.receives), peer)) {
      return false;
    }
    Storage* const mine = Window(program_.rank);
    const Storage* const theirs = Window(peer);
    bool any_through_scratch = false;
    for (int32_t p = step.first_extent; p < step.first_extent + step.num_extents; ++p) {
      const DeviceExtent& extent = program_.extents[p];
      any_through_scratch = any_through_scratch || extent.through_scratch;
      if (!extent.through_scratch && !WaitForLoans(extent)) return false;
      const Storage* const input = reinterpret_cast<const Storage*>(call_.input);
      ForEachPart(extent.first_chunk, extent.num_chunks, [&](const Part& part) {
        const int64_t at = part.window;
        Storage* const target = extent.through_scratch
                                    ? reinterpret_cast<Storage*>(call_.scratch) + at
                                    : Landing(extent, part);
        if (step.receive_op == TransferOp::kCopy) {
          platform_.Copy(target, theirs + at, part.elements);
        } else {
          const Storage* const own = extent.own_from_input ? input + part.message : mine + at;
          platform_.template Reduce<Op>(target, own, theirs + at, part.elements);
        }
      });
    }
    platform_.Post(ReadSlot(call_.signals[peer], cta_, ctas_, program_.num_ranks, program_.rank),
                   DeviceSignal(sequence_, step.receives));
    if (!any_through_scratch) return true;
    for (int32_t p = step.first_extent; p < step.first_extent + step.num_extents; ++p) {
      const DeviceExtent& extent = program_.extents[p];
      if (!extent.through_scratch) continue;
      if (!WaitForLoans(extent)) return false;
      const Storage* const scratch = reinterpret_cast<const Storage*>(call_.scratch);
      ForEachPart(extent.first_chunk, extent.num_chunks, [&](const Part& part) {
        platform_.Copy(Landing(extent, part), scratch + part.window, part.elements);
      });
    }
    return true;
  }

  Platform& platform_;
  const DeviceProgramView& program_;
  const DeviceCall& call_;
  const DeviceWindowLayout& layout_;
  const int64_t slice_;
  const int32_t cta_;
  const int32_t ctas_;
  const uint32_t sequence_;       // what this slice's signals carry
  const uint32_t wait_sequence_;  // what its waits expect: the same, but for a planted bug
};

}  // namespace device_rank

// Runs every slice of `call` for `cta` of `ctas`: what one CTA of the kernel does. False as
// soon as a wait gives up (the platform knows which peer it waited for), and at once, writing
// nothing, when an earlier launch of this rank gave up: the ranks are out of step from then on.
// The window must hold every chunk (the host checks DeviceLayoutOf's region first).
template <typename Codec, typename Op, typename Platform>
STRAGGLAR_HOST_DEVICE bool RunDeviceRank(Platform& platform, const DeviceProgramView& program,
                                         const DeviceCall& call, int32_t cta, int32_t ctas) {
  if (platform.Stopped()) return false;
  const DeviceWindowLayout layout = DeviceLayoutOf(
      call.count, program.num_chunks, call.window_elements, sizeof(typename Codec::Storage));
  if (call.count > 0 && layout.region <= 0) return false;
  for (int64_t slice = 0; slice < layout.slices; ++slice) {
    device_rank::SliceRun<Codec, Op, Platform> run(platform, program, call, layout, slice, cta,
                                                   ctas);
    if (!run.Run()) return false;
  }
  return true;
}

}  // namespace stragglar
