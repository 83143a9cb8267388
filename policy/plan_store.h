// The plans of one communicator, by (algorithm, straggler, shape): each synthesized once at its
// first request and kept for the communicator's lifetime, known by its header (PlanHeader) at one
// address, never changed once handed out. Some are kept without their transfers, as the header
// alone, because their pricer needs none (policy/plan_pricer.h) and an executor may never ask:
// - Ring's plan on one machine, priced by its one ring run (1.35 GB of transfers at 4096 ranks);
// - the library's own AllReduce on nodes when it is NCCL's (priced in closed form);
// - StragglAR's plans around a straggler other than the last rank, where they are the plan around
//   the last rank renamed (kernels/plan/rank_relabel.h): priced as that plan on renamed arrivals
//   (RenamedOf), or on nodes by that plan's index with its ranks renamed (IndexedByRenaming);
// - on nodes, the plans whose index prices them alone (StragglAR's flat and log-depth plans around
//   the last rank, the hierarchical ring): the store asks its pricer to index them before their
//   transfers go.
// Materialized gives an executor the whole plan, built at its first request and kept beside the
// header.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "absl/status/statusor.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/rank_relabel.h"
#include "policy/model/network_model.h"
#include "policy/model/topology.h"
#include "policy/stragglar_shape.h"

namespace stragglar {

// The machine the plans run on: a flat one by default. On several nodes every simulation prices
// transfers per link class, the callers' link inside a node and `inter_node_link` between.
struct PlanMachine {
  Topology topology;
  LinkModel inter_node_link = kTypicalInterNodeLink;
  // On several nodes the library's own AllReduce (Algorithm::kNative) is NCCL's, priced as its
  // faster closed form (RuntimeConfig); otherwise native is priced as Ring's plan.
  bool native_is_nccl = false;
  // On several nodes the executor runs one queue per link class (RuntimeConfig): every plan is
  // priced with SimulatePlanWithQueues, and hierarchical StragglAR's shapes include the plan
  // written for it (shards in pieces) and the one timed for it.
  bool per_class_queues = false;
  // The link inside a node that plan is timed with (the policy's: the probe's); each call is
  // still priced with the callers' link of the moment.
  LinkModel intra_node_link;

  bool PricedWithQueues() const { return per_class_queues && topology.multi_node(); }
};

class PlanStore {
 public:
  // Builds the simulation index of the plan known by `header` from its transfers (`plan`), before
  // the store drops them; whether that index prices the plan alone (false: the transfers stay).
  using IndexBeforeDropping =
      std::function<absl::StatusOr<bool>(const PlanHeader& header, const Plan& plan)>;

  PlanStore(int num_ranks, PlanMachine machine, IndexBeforeDropping index_before_dropping)
      : num_ranks_(num_ranks),
        machine_(std::move(machine)),
        index_before_dropping_(std::move(index_before_dropping)) {}
  PlanStore(const PlanStore&) = delete;
  PlanStore& operator=(const PlanStore&) = delete;

  int num_ranks() const { return num_ranks_; }
  const PlanMachine& machine() const { return machine_; }
  void SetInterNodeLink(const LinkModel& link) { machine_.inter_node_link = link; }

  // The plan for (algorithm, straggler, shape), by its header: StragglAR's as `shape` says, the
  // others ignore it. Native's is Ring's, or on nodes with PlanMachine::native_is_nccl a header of
  // its own. Ring on a machine of nodes is the hierarchical ring, what a library runs there.
  absl::StatusOr<const PlanHeader*> Get(Algorithm algorithm, std::optional<int> straggler,
                                        const StragglarShape& shape);
  // Whether `header` is one of this store's.
  bool Owns(const PlanHeader& header) const { return by_header_.contains(&header); }
  // The plan `header` (from this store) stands for, with the transfers Get kept; nullptr for a
  // plan kept as its header alone, even once Materialized: pricing reads only what Get kept, so a
  // price does not depend on whether an executor asked.
  const Plan* TransfersOf(const PlanHeader& header) const;
  // The plan `header` (from this store) stands for, with its transfers: the one kept since Get, or
  // built at the first request and kept. InvalidArgument for another store's header.
  absl::StatusOr<const Plan*> Materialized(const PlanHeader& header);
  // Whether the transfers of `header`'s plan are kept, or left out until Materialized.
  bool KeepsTransfers(const PlanHeader& header) const {
    return TransfersOf(header) != nullptr || materialized_.contains(&header);
  }
  // The transfers of the plans kept (a header alone has none): what the store's memory grows with.
  int64_t kept_transfers() const;

  // A header of a plan that is another plan of this store renamed: `canonical`, StragglAR's plan
  // of the same shape around the last rank, with `relabel` naming its ranks.
  struct Renamed {
    const PlanHeader* canonical;
    RankRelabel relabel;
  };
  // Where renaming keeps the costs (one machine; hierarchical StragglAR on nodes, renamed keeping
  // nodes): priced as its canonical plan on renamed arrivals. nullptr for other plans.
  const Renamed* RenamedOf(const PlanHeader& plan) const { return Find(renamed_, plan); }
  // On nodes, StragglAR's flat and log-depth plans around ranks other than the last: the
  // synthesizer's plan, which renames the canonical one but costs otherwise, priced exactly by the
  // canonical plan's index with its ranks renamed as it runs. nullptr for other plans.
  const Renamed* IndexedByRenaming(const PlanHeader& plan) const {
    return Find(indexed_by_renaming_, plan);
  }

 private:
  // (algorithm, straggler or -1, pieces, log-depth blocks, hierarchical, rail pieces, the size a
  // plan for per-class queues is timed for or 0)
  using Key = std::tuple<Algorithm, int, int, int, bool, int, int64_t>;
  // A plan as kept: its key, its header, and its transfers unless they were left out.
  struct Kept {
    Key key;
    PlanHeader header;
    std::optional<Plan> plan;
  };
  static const Renamed* Find(const std::map<const PlanHeader*, Renamed>& relations,
                             const PlanHeader& plan) {
    auto it = relations.find(&plan);
    return it == relations.end() ? nullptr : &it->second;
  }
  // Keeps `kept` under its key.
  Kept& Keep(Kept kept);
  // Whether StragglAR's plans of `shape` around stragglers other than the last rank are that plan
  // renamed (renamed_): on one machine the flat and log-depth plans, on nodes hierarchical
  // StragglAR only, whose renaming keeps its cost whoever the straggler is; the synthesizer's
  // flat and log-depth plans around some stragglers are faster there than the renamed ones (up to
  // 5% and 24% at 32x8 in the model, docs/policy.md).
  bool RenamesStragglars(const StragglarShape& shape) const {
    return machine_.topology.multi_node() == shape.hierarchical;
  }
  // Ring's plan on this machine: the flat ring, or the hierarchical ring on nodes; its header.
  absl::StatusOr<Plan> SynthesizeRingPlan() const;
  absl::StatusOr<PlanHeader> SynthesizeRingPlanHeader() const;
  // The plan for (algorithm, straggler, shape) with its transfers, as the synthesizers build it.
  absl::StatusOr<Plan> Synthesize(Algorithm algorithm, std::optional<int> straggler,
                                  const StragglarShape& shape) const;
  // The plan with its transfers for `kept`, as Materialized builds it.
  absl::StatusOr<Plan> WholePlan(const Kept& kept);
  // The canonical plan of `renamed` with its transfers, kept or materialized; nullptr if neither.
  const Plan* CanonicalTransfers(const Renamed& renamed) const;

  int num_ranks_;
  PlanMachine machine_;
  IndexBeforeDropping index_before_dropping_;
  std::map<Key, Kept> plans_;  // node-based, so addresses stay valid
  std::map<const PlanHeader*, Kept*> by_header_;
  // By header: the plan with its transfers an executor asked for (Materialized), where the store
  // keeps only the header.
  std::map<const PlanHeader*, Plan> materialized_;
  std::map<const PlanHeader*, Renamed> renamed_;
  std::map<const PlanHeader*, Renamed> indexed_by_renaming_;
};

}  // namespace stragglar
