// A plan priced as an executor with one queue per link class would run it (docs/scale-model.md,
// "Per-class queues"). The round model (policy/simulator.h) makes a rank run its rounds one after
// the other, so a long transfer over a NIC holds up the rank's next NVLink one even when the two
// touch different data. Here every rank has a send queue and a receive queue per link class, each
// serving its transfers in round order, and a transfer waits only for:
// - both ranks' arrival;
// - the sender's send queue and the receiver's receive queue of its class;
// - the chunks it touches: what it reads at the sender must have been written by every earlier
//   round, and what it writes at the receiver must have been written and read by every earlier
//   round (a round's reads see the values from before the round, as in the plan's semantics).
//
// Those are the only orders the plan's result depends on, so an executor that keeps them computes
// what the verifier checked. Every constraint is one the round model also imposes, so no rank
// finishes later than SimulatePlan says. Memory: two times per rank and chunk.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/plan/plan.h"
#include "policy/model/network_model.h"
#include "policy/model/simulator.h"

namespace stragglar {

// `plan` for a buffer of `bytes` on `network`, rank r arriving at arrival_s[r]. InvalidArgument as
// SimulatePlan.
absl::StatusOr<SimulationResult> SimulatePlanWithQueues(const Plan& plan, double bytes,
                                                        const NetworkModel& network,
                                                        absl::Span<const double> arrival_s);

}  // namespace stragglar
