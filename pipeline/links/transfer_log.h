// One communicator's point-to-point calls on this rank, between the interposer that sees them and
// the exchange thread that reports them. Every send and receive takes the next index of its peer
// and direction, timed or not, so that the k-th send to a peer still meets the peer's k-th
// receive when some calls go untimed (graph capture, a timer failure). A timed unit (one call, or
// a user's group of them, timed as one) waits here until the GPU has run it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/links/link_reports.h"

namespace stragglar {

class TransferLog {
 public:
  // A unit's GPU time once it has run, nullopt before; an error abandons the unit.
  using PollSeconds = std::function<absl::StatusOr<std::optional<double>>(uint64_t ticket)>;
  // Frees a ticket once its time was read or abandoned.
  using ReleaseTicket = std::function<void(uint64_t ticket)>;

  // The index of this call among this rank's calls to `peer` in its direction.
  uint64_t NextIndex(int peer, bool send);
  // A timed unit: its sides (their `seconds` filled in later) share `ticket`.
  void AddTimed(uint64_t ticket, std::vector<TransferSide> sides);

  // The sides whose time is known, oldest first, at most `max`; each once. Units whose ticket
  // failed are dropped and counted. From one thread only (the exchange thread); `poll` is called
  // without the lock held, so NextIndex and AddTimed never wait for it.
  std::vector<TransferSide> TakeTimed(int max, const PollSeconds& poll,
                                      const ReleaseTicket& release);
  // Releases every ticket still pending (the communicator is going away).
  void Abandon(const ReleaseTicket& release);

  int64_t abandoned() const;
  // Timed sides dropped unreported because more than kMaxWaiting waited.
  int64_t dropped() const;

  static constexpr size_t kMaxWaiting = 1 << 16;

 private:
  struct Unit {
    uint64_t ticket;
    std::vector<TransferSide> sides;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<int, bool>, uint64_t> next_;  // by (peer, send)
  std::deque<Unit> pending_;                       // in call order
  std::deque<TransferSide> timed_;
  int64_t abandoned_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace stragglar
