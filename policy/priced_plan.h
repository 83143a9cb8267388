// A plan as the plan cache (policy/plan_cache.h) hands it out for pricing: what it is (algorithm,
// ranks, chunks, straggler, variant) and its rounds' count and phases, and its identity, but never
// its transfers, which the cache may have left out (Ring's plan on one machine, StragglAR's plans
// renamed from another; PlanCache::For). It can be priced by the cache that made it, and it can
// be neither lowered nor verified: LowerPlan and VerifyPlan take a Plan, which only
// PlanCache::Materialized gives, with its transfers. So the compiler, not a flag read at run
// time, keeps a summary out of an executor.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/plan/plan.h"

namespace stragglar {

class PricedPlan {
 public:
  Algorithm algorithm() const { return plan_->algorithm; }
  int num_ranks() const { return plan_->num_ranks; }
  int num_chunks() const { return plan_->num_chunks; }
  std::optional<int> straggler() const { return plan_->straggler; }
  PlanVariant variant() const { return plan_->variant; }
  int num_rounds() const { return plan_->num_rounds(); }
  int pre_arrival_rounds() const { return plan_->pre_arrival_rounds; }
  int post_arrival_rounds() const { return plan_->post_arrival_rounds(); }

  // The same plan of the same cache.
  friend bool operator==(PricedPlan a, PricedPlan b) { return a.plan_ == b.plan_; }
  template <typename H>
  friend H AbslHashValue(H hash, PricedPlan plan) {
    return H::combine(std::move(hash), plan.plan_);
  }

 private:
  friend class PlanCache;
  explicit PricedPlan(const Plan& plan) : plan_(&plan) {}
  // The cache's own view: the header, whose rounds may hold no transfers.
  const Plan& header() const { return *plan_; }

  const Plan* plan_;
};

}  // namespace stragglar
