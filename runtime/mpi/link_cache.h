// The links communicators price plans with, probed once per shape of communicator and reused by
// every later one of that shape in the job: a probe (a ring round of 64 B and of 4 MiB messages,
// runtime/link_probe.h) took about 65 ms of each new communicator's 70 ms on the 2-vCPU VM, and
// frameworks make communicators often. A shape is what the probe measures: the rank count, the
// nodes, and whether the ranks share one host's cores.
//
// Every rank of a communicator must take the same model (its decisions depend on it), and only
// the ranks that made an earlier communicator of the shape have it: Agreed asks them all, and
// hands out rank 0's when every rank has one. A slow link (LinkModel::slow_rank) is a process's
// own: it is kept by its rank in MPI_COMM_WORLD, and handed out by its rank in the new
// communicator, or not at all where that process is not in it. Each rank's measured speeds
// (ProbedLinks::rank_speeds) are kept the same way, by process: a later communicator gets them
// where every one of its processes was measured, and none otherwise. A link measured again while
// a communicator runs (Communicator::FollowLinkChange: it slowed or recovered) replaces what it
// started from (LinkCacheUpdater), so that a later communicator starts from the link as it is.
#pragma once

#include <mpi.h>

#include <compare>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "exporters/observer.h"
#include "policy/model/network_model.h"
#include "runtime/link_probe.h"

namespace stragglar {

struct LinkShape {
  int ranks = 0;
  int nodes = 1;  // ranks numbered node by node, ranks / nodes on each
  bool one_host = false;
  friend auto operator<=>(const LinkShape&, const LinkShape&) = default;
};

class LinkCache {
 public:
  // Rank 0's links for `shape` when every rank of `comm` has links for it, else nullopt (probe,
  // then Keep). Collective over `comm`: two small collectives.
  std::optional<ProbedLinks> Agreed(MPI_Comm comm, const LinkShape& shape);
  // `links` as `comm` probed them, or measured them again: in place of what the cache held.
  void Keep(MPI_Comm comm, const LinkShape& shape, ProbedLinks links);

 private:
  // What Keep stored: the links, their speeds by the rank of each process in MPI_COMM_WORLD.
  struct Kept {
    ProbedLinks links;  // rank_speeds empty
    std::map<int, RankLinkSpeed> speeds_by_world_rank;
  };

  std::mutex mutex_;  // communicators are made on any of the program's threads
  std::map<LinkShape, Kept> links_;
};

// Among a communicator's observers: when an epoch's report carries another link, or other
// speeds, than the last kept (every rank of the communicator sees them after the same epoch),
// keeps them for `shape`.
// Only a link where every link is of one class is measured again (Policy::SetLink): on one node,
// or on nodes of one rank, where it is the link between nodes too.
class LinkCacheUpdater : public CollectiveObserver {
 public:
  // `comm` outlives this observer; `links` is what the communicator started from.
  LinkCacheUpdater(LinkCache& cache, MPI_Comm comm, const LinkShape& shape,
                   const ProbedLinks& links);
  void OnCall(int rank, const CallDecision& decision, int64_t bytes,
              const CallTiming& timing) override {}
  void OnEpoch(int rank, const EpochReport& report) override;

 private:
  LinkCache& cache_;
  MPI_Comm comm_;
  LinkShape shape_;
  LinkKey kept_;
  std::vector<RankLinkSpeed> kept_speeds_;
};

}  // namespace stragglar
