// A plan as the plan cache (policy/plan_cache.h) hands it out for pricing: its header (algorithm,
// ranks, chunks, straggler, variant, its rounds' count and phases) and its identity, but never its
// transfers, which the cache may have left out (Ring's plan on one machine, StragglAR's plans
// renamed from another; PlanCache::For). It can be priced by the cache that made it, and it can
// be neither lowered nor verified: LowerPlan and VerifyPlan take a Plan, which only
// PlanCache::Materialized gives, with its transfers. So the compiler keeps a header out of an
// executor.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/plan/plan.h"

namespace stragglar {

class PricedPlan {
 public:
  Algorithm algorithm() const { return header_->algorithm; }
  int num_ranks() const { return header_->num_ranks; }
  int num_chunks() const { return header_->num_chunks; }
  std::optional<int> straggler() const { return header_->straggler; }
  PlanVariant variant() const { return header_->variant; }
  int num_rounds() const { return header_->num_rounds(); }
  int pre_arrival_rounds() const { return header_->pre_arrival_rounds; }
  int post_arrival_rounds() const { return header_->post_arrival_rounds(); }

  // The same plan of the same cache.
  friend bool operator==(PricedPlan a, PricedPlan b) { return a.header_ == b.header_; }
  template <typename H>
  friend H AbslHashValue(H hash, PricedPlan plan) {
    return H::combine(std::move(hash), plan.header_);
  }

 private:
  friend class PlanCache;
  explicit PricedPlan(const PlanHeader& header) : header_(&header) {}
  // The cache's own key to the plan's store and pricer.
  const PlanHeader& header() const { return *header_; }

  const PlanHeader* header_;
};

}  // namespace stragglar
