// The MPI preload's link cache (runtime/mpi/link_cache.h) keeps a slow link by the process behind
// it: Keep stores the slow rank by its rank in MPI_COMM_WORLD, and Agreed hands it out by its rank
// in the new communicator, or not at all where that process is not in it. On 4 ranks:
//   1. kept over the world, agreed over the world reversed: rank 2 is rank 1 there;
//   2. agreed over the ranks without world rank 2: no slow rank, factor 1;
//   3. kept over the world reversed (world rank 2 is rank 1 there), agreed over the world: 2;
//   4. a link measured again replaces the kept one: an epoch's report of a recovered link, then
//      of rank 3's slowing, each through LinkCacheUpdater (an unchanged report keeps nothing);
//      and on nodes of several ranks, where a link is never measured again, nothing is kept;
//   5. each rank's measured speeds, kept by process: agreed over the world reversed, each rank
//      gets its own process's; over ranks of which one was not measured, none; a report of new
//      speeds on an unchanged link replaces them.
// Prints "link_cache: ok" on rank 0; exits 1 on a mismatch.
#include <mpi.h>

#include <cstdio>
#include <optional>
#include <vector>

#include "runtime/mpi/link_cache.h"

namespace {

stragglar::ProbedLinks SlowLinks(int slow_rank) {
  const stragglar::LinkModel link{.alpha_s = 1e-4,
                                  .bandwidth_bytes_per_s = 1e7,
                                  .slow_rank = slow_rank,
                                  .slow_factor = slow_rank >= 0 ? 3.0 : 1.0};
  return {.intra_node = link, .inter_node = link};
}

bool Expect(const char* what, const std::optional<stragglar::ProbedLinks>& links, int slow_rank,
            double slow_factor) {
  const bool ok = links.has_value() && links->intra_node.slow_rank == slow_rank &&
                  links->intra_node.slow_factor == slow_factor &&
                  links->intra_node.bandwidth_bytes_per_s == 1e7;
  if (!ok) {
    std::printf("link_cache: FAIL %s: want rank %d at %g, got %s rank %d at %g\n", what, slow_rank,
                slow_factor, links.has_value() ? "" : "no links;",
                links.has_value() ? links->intra_node.slow_rank : -9,
                links.has_value() ? links->intra_node.slow_factor : 0.0);
  }
  return ok;
}

// World rank w's speeds in case 5: distinct per process and per field.
stragglar::RankLinkSpeed SpeedOf(int world_rank, double scale = 1) {
  const double base = scale * 1e6 * (world_rank + 1);
  return {.send_bytes_per_s = base,
          .receive_bytes_per_s = base + 1,
          .slowest_send_bytes_per_s = base + 2,
          .slowest_receive_bytes_per_s = base + 3};
}

// Whether `links` carries, for each rank of a communicator, world rank world_ranks[rank]'s speeds.
bool ExpectSpeeds(const char* what, const std::optional<stragglar::ProbedLinks>& links,
                  const std::vector<int>& world_ranks, double scale = 1) {
  std::vector<stragglar::RankLinkSpeed> want;
  for (int world_rank : world_ranks) want.push_back(SpeedOf(world_rank, scale));
  const bool ok = links.has_value() && links->rank_speeds == want;
  if (!ok) {
    std::printf("link_cache: FAIL %s: want %zu speeds, got %s%zu\n", what, want.size(),
                links.has_value() ? "" : "no links; ",
                links.has_value() ? links->rank_speeds.size() : 0);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    if (rank == 0) std::printf("link_cache: FAIL needs 4 ranks, got %d\n", size);
    MPI_Finalize();
    return 1;
  }
  stragglar::LinkCache cache;
  bool ok = true;
  // 1. Kept over the world, agreed over the world reversed.
  const stragglar::LinkShape four{.ranks = 4, .nodes = 4};
  cache.Keep(MPI_COMM_WORLD, four, SlowLinks(2));
  MPI_Comm reversed = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &reversed);
  ok = Expect("the world reversed", cache.Agreed(reversed, four), 1, 3) && ok;
  // 2. Agreed over the ranks without world rank 2 (a shape of 3 ranks, kept over the world).
  const stragglar::LinkShape three{.ranks = 3, .nodes = 3};
  cache.Keep(MPI_COMM_WORLD, three, SlowLinks(2));
  MPI_Comm without = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 2 ? 1 : 0, rank, &without);
  if (rank != 2) ok = Expect("without the slow process", cache.Agreed(without, three), -1, 1) && ok;
  // 3. Kept over the world reversed, where world rank 2 is rank 1, agreed over the world.
  const stragglar::LinkShape other{.ranks = 4, .nodes = 2};
  cache.Keep(reversed, other, SlowLinks(1));
  ok = Expect("kept by a communicator's rank", cache.Agreed(MPI_COMM_WORLD, other), 2, 3) && ok;
  // 4. Measured again, through the communicator's observer.
  const stragglar::LinkShape again{.ranks = 4, .nodes = 4};
  cache.Keep(MPI_COMM_WORLD, again, SlowLinks(2));
  stragglar::LinkCacheUpdater updater(cache, MPI_COMM_WORLD, again, SlowLinks(2));
  stragglar::EpochReport report;
  report.link = SlowLinks(-1).intra_node;
  updater.OnEpoch(rank, report);
  ok = Expect("a link that recovered", cache.Agreed(MPI_COMM_WORLD, again), -1, 1) && ok;
  report.link = SlowLinks(3).intra_node;
  updater.OnEpoch(rank, report);
  ok = Expect("a link that slowed", cache.Agreed(reversed, again), 0, 3) && ok;
  cache.Keep(MPI_COMM_WORLD, again, SlowLinks(2));  // another communicator's, since
  updater.OnEpoch(rank, report);                    // unchanged: nothing kept
  ok = Expect("an unchanged link", cache.Agreed(MPI_COMM_WORLD, again), 2, 3) && ok;
  const stragglar::LinkShape nodes{.ranks = 4, .nodes = 2, .one_host = true};
  cache.Keep(MPI_COMM_WORLD, nodes, SlowLinks(2));
  stragglar::LinkCacheUpdater on_nodes(cache, MPI_COMM_WORLD, nodes, SlowLinks(2));
  on_nodes.OnEpoch(rank, report);  // rank 3's link: not this shape's to change
  ok = Expect("nodes of two ranks", cache.Agreed(MPI_COMM_WORLD, nodes), 2, 3) && ok;
  // 5. Speeds, by process.
  const stragglar::LinkShape measured{.ranks = 4, .nodes = 1};
  stragglar::ProbedLinks with_speeds = SlowLinks(2);
  for (int world_rank = 0; world_rank < size; ++world_rank) {
    with_speeds.rank_speeds.push_back(SpeedOf(world_rank));
  }
  cache.Keep(MPI_COMM_WORLD, measured, with_speeds);
  ok = ExpectSpeeds("speeds over the world reversed", cache.Agreed(reversed, measured),
                    {3, 2, 1, 0}) &&
       ok;
  const stragglar::LinkShape measured_three{.ranks = 3, .nodes = 1};
  if (rank != 2) {
    stragglar::ProbedLinks three_speeds = SlowLinks(-1);
    for (int world_rank : {0, 1, 3}) three_speeds.rank_speeds.push_back(SpeedOf(world_rank));
    cache.Keep(without, measured_three, three_speeds);
    ok = ExpectSpeeds("speeds over the measured ranks", cache.Agreed(without, measured_three),
                      {0, 1, 3}) &&
         ok;
  } else {
    cache.Keep(without, measured_three, SlowLinks(-1));  // its own communicator's, unmeasured
  }
  MPI_Comm without_first = MPI_COMM_NULL;  // world ranks 1, 2, 3, of which 2 was not measured
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 1 : 0, rank, &without_first);
  if (rank != 0) {
    ok = ExpectSpeeds("speeds with an unmeasured rank", cache.Agreed(without_first, measured_three),
                      {}) &&
         ok;
  }
  stragglar::LinkCacheUpdater speeds_updater(cache, MPI_COMM_WORLD, measured, with_speeds);
  stragglar::EpochReport measured_again;
  measured_again.link = with_speeds.intra_node;
  for (int world_rank = 0; world_rank < size; ++world_rank) {
    measured_again.link_speeds.push_back(SpeedOf(world_rank, 2));
  }
  speeds_updater.OnEpoch(rank, measured_again);
  ok = ExpectSpeeds("speeds measured again", cache.Agreed(MPI_COMM_WORLD, measured), {0, 1, 2, 3},
                    2) &&
       ok;
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&without);
  MPI_Comm_free(&without_first);
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0 && all_ok == 1) std::printf("link_cache: ok\n");
  MPI_Finalize();
  return all_ok == 1 ? 0 : 1;
}
