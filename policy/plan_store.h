// The plans of one communicator, by (algorithm, straggler, shape): each synthesized once at its
// first request and kept for the communicator's lifetime, at one address, and never changed once
// handed out. Some are kept without their transfers, as headers (their rounds, no transfers),
// because their pricer needs none (policy/plan_pricer.h) and an executor may never ask:
// - Ring's plan on one machine, priced by its one ring run (1.35 GB of transfers at 4096 ranks);
// - the library's own AllReduce on nodes when it is NCCL's (priced in closed form);
// - StragglAR's plans around a straggler other than the last rank, where they are the plan around
//   the last rank renamed (kernels/plan/rank_relabel.h): priced as that plan on renamed arrivals
//   (RenamedOf), or on nodes by that plan's index with its ranks renamed (IndexedByRenaming);
// - on nodes, the plans whose index prices them alone (StragglAR's flat and log-depth plans around
//   the last rank, the hierarchical ring): the store asks its pricer to index them before their
//   transfers go.
// Materialized gives an executor the whole plan, built at its first request and kept beside the
// header, which stays as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "absl/status/statusor.h"
#include "kernels/plan/plan.h"
#include "kernels/plan/rank_relabel.h"
#include "policy/network_model.h"
#include "policy/stragglar_shape.h"
#include "policy/topology.h"

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
  // written for it (shards in pieces).
  bool per_class_queues = false;

  bool PricedWithQueues() const { return per_class_queues && topology.multi_node(); }
};

class PlanStore {
 public:
  // Builds `plan`'s simulation index from its transfers, before the store drops them; whether
  // that index prices the plan alone (false: the transfers stay).
  using IndexBeforeDropping = std::function<absl::StatusOr<bool>(const Plan& plan)>;

  PlanStore(int num_ranks, PlanMachine machine, IndexBeforeDropping index_before_dropping)
      : num_ranks_(num_ranks),
        machine_(std::move(machine)),
        index_before_dropping_(std::move(index_before_dropping)) {}
  PlanStore(const PlanStore&) = delete;
  PlanStore& operator=(const PlanStore&) = delete;

  int num_ranks() const { return num_ranks_; }
  const PlanMachine& machine() const { return machine_; }

  // The plan for (algorithm, straggler, shape): StragglAR's as `shape` says, the others ignore
  // it. Native's is Ring's, or on nodes with PlanMachine::native_is_nccl a header of its own.
  // Ring on a machine of nodes is the hierarchical ring, what a library runs there.
  absl::StatusOr<const Plan*> Get(Algorithm algorithm, std::optional<int> straggler,
                                  const StragglarShape& shape);
  // `header` (from this store) with its transfers: itself when it has them. InvalidArgument for
  // another store's plan without them.
  absl::StatusOr<const Plan*> Materialized(const Plan& header);
  // Whether `header`'s transfers are kept, or left out until Materialized.
  bool KeepsTransfers(const Plan& header) const {
    return !header.transfers_elided || materialized_.contains(&header);
  }
  // The transfers of the plans kept (a header has none): what the store's memory grows with.
  int64_t kept_transfers() const;

  // A header that is another plan of this store renamed: `canonical`, StragglAR's plan of the
  // same shape around the last rank, with `relabel` naming its ranks.
  struct Renamed {
    const Plan* canonical;
    RankRelabel relabel;
  };
  // Where renaming keeps the costs (one machine; hierarchical StragglAR on nodes, renamed keeping
  // nodes): priced as its canonical plan on renamed arrivals. nullptr for other plans.
  const Renamed* RenamedOf(const Plan& plan) const { return Find(renamed_, plan); }
  // On nodes, StragglAR's flat and log-depth plans around ranks other than the last: the
  // synthesizer's plan, which renames the canonical one but costs otherwise, priced exactly by the
  // canonical plan's index with its ranks renamed as it runs. nullptr for other plans.
  const Renamed* IndexedByRenaming(const Plan& plan) const {
    return Find(indexed_by_renaming_, plan);
  }

 private:
  // (algorithm, straggler or -1, pieces, log-depth blocks, hierarchical)
  using Key = std::tuple<Algorithm, int, int, int, bool>;
  static const Renamed* Find(const std::map<const Plan*, Renamed>& relations, const Plan& plan) {
    auto it = relations.find(&plan);
    return it == relations.end() ? nullptr : &it->second;
  }
  // Whether StragglAR's plans of `shape` around stragglers other than the last rank are that plan
  // renamed (renamed_): on one machine the flat and log-depth plans, on nodes hierarchical
  // StragglAR only, whose renaming keeps its cost whoever the straggler is; the synthesizer's
  // flat and log-depth plans around some stragglers are faster there than the renamed ones (up to
  // 5% and 24% at 32x8 in the model, docs/policy.md).
  bool RenamesStragglars(const StragglarShape& shape) const {
    return machine_.topology.multi_node() == shape.hierarchical;
  }
  // Ring's plan on this machine: the flat ring, or the hierarchical ring on nodes.
  absl::StatusOr<Plan> SynthesizeRingPlan(bool with_transfers) const;
  // The plan for (algorithm, straggler, shape) with its transfers, as the synthesizers build it.
  absl::StatusOr<Plan> Synthesize(Algorithm algorithm, std::optional<int> straggler,
                                  const StragglarShape& shape) const;
  // The header of the plan around `straggler` that renames `canonical`: its rounds, no transfers.
  static Plan HeaderOf(const Plan& canonical, int straggler);
  // The plan with its transfers for `header` (kept under `key`), as Materialized builds it.
  absl::StatusOr<Plan> WholePlan(const Key& key, const Plan& header);

  int num_ranks_;
  PlanMachine machine_;
  IndexBeforeDropping index_before_dropping_;
  std::map<Key, Plan> plans_;  // node-based, so addresses stay valid
  // By header: the plan with its transfers an executor asked for (Materialized).
  std::map<const Plan*, Plan> materialized_;
  std::map<const Plan*, Renamed> renamed_;
  std::map<const Plan*, Renamed> indexed_by_renaming_;
};

}  // namespace stragglar
