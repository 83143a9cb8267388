// Post-arrival schedule synthesis for StragglAR.
//
// Powers of two (n = 2^K, m = n - 1 chunks) use an exact cyclic pipeline. Every rank follows the
// same timetable, shifted by its exchange round: at "local time" u = (t - r) mod m it receives the
// chunk of age a(u) (generated a(u) rounds ago) and forwards the chunk of age b(u). Each chunk then
// spreads as a binomial tree (1, 2, 4, ... copies per round) and is complete K rounds after its
// exchange, and every free port is busy in every steady-state round. The timetable is found by a
// small depth-first search over u (it never backtracks in practice): receipts must hit every other
// chunk exactly once (u - a(u) a permutation of the non-zero residues mod m) and the forwarding
// duties they create must tile the rank's send slots. Only the last chunk would finish one round
// late; in the last K-1 rounds the straggler seeds it into the rank whose (now absent) exchange
// would start a new pipeline, and those "virtual" pipelines carry it to every remaining rank.
//
// Other n <= 64 (except 63) use the same pipeline with a general timetable stored below (ages
// up to K+3, found offline) and a per-round matching for the last K-1 rounds; see
// BuildFromTimetable. n = 63 has no known timetable; its schedule (L(63) = 67 rounds) is stored
// as one receive row per rank, found offline by an integer-flow model (BuildFromReceiveRows,
// tools/synth/). Remaining n use a deadline-aware greedy (valid, but above L(n)): each round,
// chunks are served in order of least slack (rounds left minus the doublings they still need), each
// from the senders with the fewest other useful chunks to the receivers with the least receive
// slack.
#include "kernels/synth/stragglar_schedule.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stragglar {
namespace {

// Per-rank timetable of the cyclic pipeline on m = 2^K - 1 ranks: receive_age[u] and send_age[u]
// for local times u = 1..m-1 (u = 0 is the exchange round).
class CyclicTimetable {
 public:
  CyclicTimetable(int num_chunks, int log2_ranks)
      : m_(num_chunks),
        k_(log2_ranks),
        receive_age_(num_chunks, 0),
        forwards_extra_(num_chunks, 0),
        residue_used_(num_chunks, 0),
        remaining_(log2_ranks + 1, 0) {}

  bool Solve() {
    // Binomial tree: 2^(a-1) copies at age a < K, the rest (2^(K-1) - 1) at age K.
    for (int age = 1; age < k_; ++age) remaining_[age] = 1 << (age - 1);
    remaining_[k_] = m_ - (1 << (k_ - 1));
    extra_sends_left_ = remaining_[k_] - 1;  // The own chunk also goes out at age K (time K).
    next_block_start_ = k_;
    if (!Search(1)) return false;
    send_age_.assign(m_, 0);
    for (int u = 1; u <= k_; ++u) send_age_[u] = u;  // Own chunk, generated at local time 0.
    for (int u = k_; u < m_ - 1;) {
      const int block = k_ - 1 - receive_age_[u] + forwards_extra_[u];
      for (int v = u + 1; v <= u + block; ++v) send_age_[v] = v - (u - receive_age_[u]);
      u += block;
    }
    return true;
  }

  int receive_age(int u) const { return receive_age_[u]; }
  int send_age(int u) const { return send_age_[u]; }

 private:
  // A chunk received at age a < K must be forwarded in each following round until age K-1 (every
  // holder doubles it), optionally once more at age K. Those forwarding blocks must follow each
  // other without gaps, so a new block starts exactly where the previous one ends.
  bool Search(int u) {
    if (++nodes_ > kNodeLimit) return false;
    if (u == m_) return next_block_start_ == m_ - 1 && HoldsYoungChunkAtCycleEnd();
    // A residue g can only be received at local times g+1..g+K; give up once that window passed.
    const int expiring = u - k_ - 1;
    if (expiring >= 1 && expiring < m_ - k_ + 1 && !residue_used_[expiring]) return false;
    const bool starts_block = u == next_block_start_ && u < m_ - 1;
    for (int age = k_; age >= 1; --age) {
      if (remaining_[age] == 0) continue;
      const int residue = ((u - age) % m_ + m_) % m_;
      if (residue == 0 || residue_used_[residue]) continue;
      if (starts_block ? age == k_ : age < k_ - 1) continue;
      for (int extra = 1; extra >= 0; --extra) {
        if (!starts_block && extra == 1) continue;
        if (starts_block && age == k_ - 1 && extra == 0) continue;
        if (extra == 1 && extra_sends_left_ == 0) continue;
        const int block = k_ - 1 - age + extra;
        if (starts_block && u + block > m_ - 1) continue;
        residue_used_[residue] = 1;
        --remaining_[age];
        extra_sends_left_ -= extra;
        receive_age_[u] = age;
        forwards_extra_[u] = extra;
        const int saved_start = next_block_start_;
        if (starts_block) next_block_start_ = u + block;
        if (Search(u + 1)) return true;
        next_block_start_ = saved_start;
        residue_used_[residue] = 0;
        ++remaining_[age];
        extra_sends_left_ += extra;
      }
    }
    return false;
  }

  // The tail argument needs the rank that would exchange next to hold one of the K youngest chunks.
  bool HoldsYoungChunkAtCycleEnd() const {
    for (int u = 1; u < m_; ++u) {
      if (u - receive_age_[u] >= m_ - k_) return true;
    }
    return false;
  }

  static constexpr long kNodeLimit = 2'000'000;
  const int m_, k_;
  std::vector<int> receive_age_, forwards_extra_, send_age_;
  std::vector<char> residue_used_;
  std::vector<int> remaining_;
  int extra_sends_left_ = 0, next_block_start_ = 0;
  long nodes_ = 0;
};

// Exact schedule for n = 2^K >= 4; returns false if the timetable search fails.
bool BuildCyclic(int n, PostArrivalSchedule& rounds) {
  const int m = n - 1, sigma = n - 1, k = CeilLog2(n);
  const int num_rounds = StragglarRoundLowerBound(n);
  CyclicTimetable timetable(m, k);
  if (!timetable.Solve()) return false;
  rounds.assign(num_rounds, {});
  std::vector<char> has_last_chunk(n, 0);
  std::map<int, std::pair<std::vector<int>, std::vector<int>>> by_generation;
  for (int t = 0; t < num_rounds; ++t) {
    std::vector<ScheduleMove>& moves = rounds[t];
    if (t < m) {
      moves.push_back({t, sigma, t});
      moves.push_back({sigma, t, t});
    }
    by_generation.clear();
    for (int r = 0; r < m; ++r) {
      const int u = ((t - r) % m + m) % m;
      if (u == 0) continue;
      const int sent = t - timetable.send_age(u), received = t - timetable.receive_age(u);
      if (sent >= 0) by_generation[sent].first.push_back(r);
      if (received >= 0) by_generation[received].second.push_back(r);
    }
    std::vector<int> got_last_chunk;
    for (auto& [generation, senders_receivers] : by_generation) {
      const auto& [senders, receivers] = senders_receivers;
      // Generations >= m would be exchanged by ranks that no longer exchange: those pipelines
      // carry the last chunk instead (the straggler seeded their roots).
      const int chunk = std::min(generation, m - 1);
      for (size_t i = 0; i < senders.size() && i < receivers.size(); ++i) {
        if (chunk == m - 1) {
          if (has_last_chunk[receivers[i]]) continue;
          got_last_chunk.push_back(receivers[i]);
        }
        moves.push_back({senders[i], receivers[i], chunk});
      }
    }
    if (t >= m && !has_last_chunk[t - m]) {
      moves.push_back({sigma, t - m, m - 1});
      got_last_chunk.push_back(t - m);
    }
    for (int r : got_last_chunk) has_last_chunk[r] = 1;
    if (t == m - 1) has_last_chunk[m - 1] = 1;
  }
  // Every rank must now hold the last chunk; anything else means the construction does not apply.
  for (int r = 0; r < m; ++r) {
    if (!has_last_chunk[r]) return false;
  }
  return true;
}

// Valid for every n; not always L(n) rounds.
PostArrivalSchedule BuildGreedy(int n) {
  const int sigma = n - 1, m = n - 1, lower_bound = StragglarRoundLowerBound(n);
  std::vector<std::vector<char>> holds(n, std::vector<char>(m, 0));
  std::vector<int> missing(n, m - 1), holders(m, 0), useful_chunks(n, 0);
  missing[sigma] = 0;
  int total_missing = m * (m - 1);
  std::vector<int> incomplete;  // Final chunks some rank still lacks.
  PostArrivalSchedule rounds;
  std::vector<std::pair<long, int>> senders, receivers;
  for (int t = 0; t < m || total_missing > 0; ++t) {
    std::vector<ScheduleMove>& moves = rounds.emplace_back();
    std::vector<char> send_busy(n, 0), recv_busy(n, 0);
    if (t < m) {
      moves.push_back({t, sigma, t});
      moves.push_back({sigma, t, t});
      send_busy[t] = recv_busy[t] = send_busy[sigma] = 1;
    }
    recv_busy[sigma] = 1;
    auto receive_slack = [&](int r) {
      const int free_rounds = std::max(0, lower_bound - t) - (r >= t && r < lower_bound ? 1 : 0);
      return free_rounds - missing[r];
    };
    std::vector<int> chunk_slack(m, 0);
    for (int c : incomplete) {
      int doublings = 0;
      for (long reach = holders[c] + 1; reach < n; reach *= 2) ++doublings;
      chunk_slack[c] = (lower_bound - t) - doublings;
    }
    std::vector<int> order = incomplete;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return chunk_slack[a] != chunk_slack[b] ? chunk_slack[a] < chunk_slack[b] : a > b;
    });
    std::vector<ScheduleMove> copies;
    for (int c : order) {
      senders.clear();
      receivers.clear();
      for (int r = 0; r < n; ++r) {
        if (!send_busy[r] && (holds[r][c] || (r == sigma && t >= m))) {
          senders.push_back({r == sigma ? 1L << 30 : useful_chunks[r], r});
        }
        if (!recv_busy[r] && r != sigma && !holds[r][c]) {
          // Rank t+1 cannot forward next round, so it is a slightly worse receiver.
          receivers.push_back({receive_slack(r) * 4L + (r == t + 1 ? 2 : 0), r});
        }
      }
      const size_t count = std::min(senders.size(), receivers.size());
      std::partial_sort(senders.begin(), senders.begin() + count, senders.end());
      std::partial_sort(receivers.begin(), receivers.begin() + count, receivers.end());
      for (size_t i = 0; i < count; ++i) {
        send_busy[senders[i].second] = recv_busy[receivers[i].second] = 1;
        copies.push_back({senders[i].second, receivers[i].second, c});
      }
    }
    for (const ScheduleMove& move : copies) {
      holds[move.dst][move.chunk] = 1;
      --missing[move.dst];
      ++holders[move.chunk];
      ++useful_chunks[move.dst];
      --total_missing;
      moves.push_back(move);
    }
    if (t < m) {
      holds[t][t] = holds[sigma][t] = 1;
      ++holders[t];
      ++useful_chunks[t];
      incomplete.push_back(t);
    }
    std::vector<int> still_incomplete;
    for (int c : incomplete) {
      if (holders[c] < m) {
        still_incomplete.push_back(c);
        continue;
      }
      for (int r = 0; r < m; ++r) --useful_chunks[r];
    }
    incomplete = std::move(still_incomplete);
  }
  return rounds;
}

// ---------------------------------------------------------------------------------------------
// General cyclic pipeline (any n). A timetable gives, for local times u = 1..m-1, the age of the
// chunk a rank receives (receive_age[u]) and the age of the chunk it sends (send_age[u]); ages run
// up to K+3. BuildFromTimetable lays the timetable out over the rounds, pairs senders and receivers
// of each chunk, and fills the last K-1 rounds (where the pipeline's slots for not-existing chunks
// m, m+1, ... are free and the straggler holds everything) with a per-round bipartite matching that
// hands every rank the late chunks it still lacks. With sum of receive ages = (K-1)m those free
// slots are exactly as many as the late copies, so every check below must pass for L(n) rounds.
bool BuildFromTimetable(int n, const std::vector<int>& receive_age,
                        const std::vector<int>& send_age, PostArrivalSchedule& rounds) {
  const int m = n - 1, sigma = n - 1, num_rounds = StragglarRoundLowerBound(n);
  rounds.assign(num_rounds, {});
  std::vector<std::vector<int>> free_receivers(num_rounds), free_senders(num_rounds);
  std::vector<std::pair<int, int>> senders, receivers;  // (chunk, rank)
  for (int t = 0; t < num_rounds; ++t) {
    senders.clear();
    receivers.clear();
    for (int r = 0; r < m; ++r) {
      const int u = ((t - r) % m + m) % m;
      if (u == 0) {
        if (t >= m) {  // No exchange left: both ports are free.
          free_receivers[t].push_back(r);
          free_senders[t].push_back(r);
        }
        continue;
      }
      const int received = t - receive_age[u], sent = t - send_age[u];
      if (received >= m) {
        free_receivers[t].push_back(r);
      } else if (received >= 0) {
        receivers.push_back({received, r});
      }
      if (sent >= m) {
        free_senders[t].push_back(r);
      } else if (sent >= 0) {
        senders.push_back({sent, r});
      }
    }
    std::sort(senders.begin(), senders.end());
    std::sort(receivers.begin(), receivers.end());
    if (senders.size() != receivers.size()) return false;
    std::vector<ScheduleMove>& moves = rounds[t];
    if (t < m) {
      moves.push_back({t, sigma, t});
      moves.push_back({sigma, t, t});
    }
    for (size_t i = 0; i < senders.size(); ++i) {
      if (senders[i].first != receivers[i].first) return false;
      moves.push_back({senders[i].second, receivers[i].second, senders[i].first});
    }
  }
  // holds[r][c]: rank r holds final chunk c at the start of the current round.
  std::vector<std::vector<char>> holds(n, std::vector<char>(m, 0));
  auto apply_round = [&](int t) {
    for (const ScheduleMove& move : rounds[t]) {
      const bool exchange = t < m && move.chunk == t && (move.src == sigma || move.dst == sigma);
      if (!exchange && (!holds[move.src][move.chunk] || holds[move.dst][move.chunk])) return false;
    }
    for (const ScheduleMove& move : rounds[t]) holds[move.dst][move.chunk] = 1;
    return true;
  };
  for (int t = 0; t < m; ++t) {
    if (!apply_round(t)) return false;
  }
  // Late copies: chunks a rank neither holds now nor gets from the pipeline in the tail.
  std::vector<std::vector<char>> arrives(m, std::vector<char>(m, 0));
  for (int t = m; t < num_rounds; ++t) {
    for (const ScheduleMove& move : rounds[t]) arrives[move.dst][move.chunk] = 1;
  }
  std::vector<std::vector<int>> late(m);
  std::vector<int> free_slots(m, 0);
  for (int t = m; t < num_rounds; ++t) {
    for (int r : free_receivers[t]) ++free_slots[r];
  }
  for (int r = 0; r < m; ++r) {
    for (int c = m - 1; c >= 0; --c) {  // Youngest first: they have the fewest holders.
      if (c != r && !holds[r][c] && !arrives[r][c]) late[r].push_back(c);
    }
    // Zero slack: a rank with fewer free receive slots than late chunks cannot finish.
    if (static_cast<int>(late[r].size()) != free_slots[r]) return false;
  }
  for (int t = m; t < num_rounds; ++t) {
    const std::vector<int>& rx = free_receivers[t];
    std::vector<int> tx = free_senders[t];
    tx.push_back(sigma);
    // The chunk sender j can give receiver i (the youngest one i lacks), or -1.
    auto chunk_for = [&](int i, int j) {
      if (rx[i] == tx[j]) return -1;
      for (int c : late[rx[i]]) {
        if (holds[tx[j]][c]) return c;
      }
      return -1;
    };
    std::vector<int> sender_of(rx.size(), -1), receiver_of(tx.size(), -1);
    std::vector<char> visited;
    // Kuhn's augmenting paths; every free receiver must be served in every tail round.
    auto augment = [&](auto&& self, int i) -> bool {
      for (size_t j = 0; j < tx.size(); ++j) {
        if (visited[j] || chunk_for(i, j) < 0) continue;
        visited[j] = 1;
        if (receiver_of[j] < 0 || self(self, receiver_of[j])) {
          receiver_of[j] = i;
          sender_of[i] = j;
          return true;
        }
      }
      return false;
    };
    for (size_t i = 0; i < rx.size(); ++i) {
      visited.assign(tx.size(), 0);
      if (!augment(augment, i)) return false;
    }
    for (size_t i = 0; i < rx.size(); ++i) {
      const int c = chunk_for(i, sender_of[i]);
      rounds[t].push_back({tx[sender_of[i]], rx[i], c});
      std::vector<int>& still_late = late[rx[i]];
      still_late.erase(std::find(still_late.begin(), still_late.end(), c));
    }
    if (!apply_round(t)) return false;
  }
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < m; ++c) {
      if (!holds[r][c]) return false;
    }
  }
  return true;
}

// Timetables found offline by a randomized depth-first search over u (see the doc), one digit per
// local time u = 1..m-1 ('0' + age). They are rebuilt and fully checked at runtime like any other
// timetable.
struct StoredTimetable {
  int num_ranks;
  const char* receive_ages;
  const char* send_ages;
};
constexpr StoredTimetable kStoredTimetables[] = {
    // BEGIN STORED TIMETABLES
    {5, "314", "143"},
    {6, "4321", "1234"},
    {7, "31422", "12243"},
    {9, "5425215", "1254552"},
    {10, "54253215", "12545532"},
    {11, "542533215", "125355432"},
    {12, "5425333215", "1233555432"},
    {13, "54154324332", "12323553444"},
    {14, "544243332414", "123534444342"},
    {15, "4442433331425", "1235344444233"},
    {17, "636644216636326", "123466662364663"},
    {18, "6646443363162662", "1234666646623346"},
    {19, "66554443535226615", "12366665454534552"},
    {20, "665544354425525515", "123455545556456452"},
    {21, "7655444435352551552", "1276555554545345234"},
    {22, "66554444353525525515", "12365555545456453452"},
    {23, "775544444353535255152", "123477555545454534523"},
    {24, "6655354155544425535352", "1236565523455553454545"},
    {25, "66554444435353525525515", "12366555554545453453452"},
    {26, "665544443544353525525515", "123466555455545453453452"},
    {27, "6555444444155535255353525", "1264555555523454534545453"},
    {28, "75554444441555353535255253", "12375555555234545454534534"},
    {29, "655543542554444155535353525", "123655455345555523454545453"},
    {30, "5555354444444352553535251655", "1236545555555545345454534234"},
    {31, "55536353544351555425525544444", "12344645455545234553453455555"},
    {33, "7776475555543747447437372727717", "1234767777777475775774545343452"},
    {34, "77576554475554636633773617277726", "12367777767776774564556452335563"},
    {35, "777665555555465166377447437273772", "123477777767777623455655654534556"},
    {36, "7666655465555546447437373727177277", "1277776777776765655656545453423434"},
    {37, "77576555554654646266646437371727773", "12367777777776565634565654545234466"},
    {38, "776665555554646463664636622777137773", "123777767777565656456564563346623466"},
    {39, "8573775555555554174774474372727737374", "1238557777777777723457557545343454545"},
    {40, "77666366555555554646427664636636276176", "12377777666666666565656456564564534523"},
    {41, "766665555555464646464636636626377166277", "127777766666656565656564564563446623436"},
    {42, "7773775553664655555554646463662666266616", "1234557777756566666666565656456345634562"},
    {43, "84776555555546464646464636273772637716637", "12387777777765656565656564534466344662344"},
    {44, "776637655555166665266655542766464646363763",
     "123776777666623456634566665345656565645656"},
    {45, "8866655555555554646464646463663637276271773",
     "1237878777666666565656565656456454534534234"},
    {46, "77576555555555464646464646366366366327727177",
     "12367767777776656565656565645645645643453423"},
    {47, "776665555555555366551666646447447437373727627",
     "123776677777776645666234565655655654545453453"},
    {48, "7766655555555554646464646463663663663277626177",
     "1237777776666666565656565656456456456434563423"},
    {49, "77766555465555555546464626664646366266636636616",
     "12347776656666666665656563456565645634564564562"},
    {50, "766665555555555546464646463647266636636626661666",
     "127756666666666665656565656456634564564563456234"},
    {51, "9766655552666465555553665464646463664636636616626",
     "1239766666345656666666456656565656456564564562343"},
    {52, "99666555465555266655555464646464646366366266616633",
     "12345996656666634566666656565656565645645634562344"},
    {53, "976665166664655555555555546464646366366366266626643",
     "123957623456566666666666665656565645645645634563455"},
    {54, "7766655555555526665554646266646464646366366366366166",
     "1237766666666663456666565634565656565645645645645623"},
    {55, "76666555555555553665546464646462666166664646366366266",
     "12745666666666666456665656565656345623456565645645634"},
    {56, "966665516666366555552666555555464646464646366463662636",
     "123496662345645666666345666666656565656565645656456345"},
    {57, "9666655266655555555555546366464646462666464636636616636",
     "1234596634566666666666665645656565656345656564564562345"},
    {58, "96666555555555366366555546464646166664646462666463662636",
     "12349666666666645645666665656565623456565656345656456344"},
    {59, "966665555166665555555555464646464646366366366366266626644",
     "123496666623456666666666656565656565645645645645634563455"},
    {60, "9666655555555366516666555465554646462666464636636636626644",
     "1234596666666645662345666656666565656345656564564564563455"},
    {61, "86666465555555555555554646464646463663663663662666266616664",
     "12345856666666666666666565656565656456456456456345634562345"},
    {62, "766662666366552666464616666366536654646553665555465555546464",
     "123456345745666345656562345645664566565666456666656666665656"},
    // END STORED TIMETABLES
};

bool BuildStored(int n, PostArrivalSchedule& rounds) {
  for (const StoredTimetable& stored : kStoredTimetables) {
    if (stored.num_ranks != n) continue;
    if (std::string_view(stored.receive_ages).size() != static_cast<size_t>(n - 2) ||
        std::string_view(stored.send_ages).size() != static_cast<size_t>(n - 2)) {
      return false;
    }
    std::vector<int> receive_age(n - 1, 0), send_age(n - 1, 0);
    for (int u = 1; u < n - 1; ++u) {
      receive_age[u] = stored.receive_ages[u - 1] - '0';
      send_age[u] = stored.send_ages[u - 1] - '0';
    }
    return BuildFromTimetable(n, receive_age, send_age, rounds);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Stored receive rows. n = 63 (m = 2^K - 2) has no cyclic timetable that the search could find, so
// its schedule is stored per rank: row r has one character per round t, the age of the chunk rank
// r receives in round t ('1'..'9', 'a' = 10, ...; the chunk is t - age) or '.' for nothing (and for
// its exchange round). The rows were found offline as an integer flow over per-rank states
// (tools/synth/stragglar_flow_ilp.py, see docs/stragglar-synthesis.md). Senders are not stored:
// each round pairs the receivers with holders of their chunks by bipartite matching, and every
// move is re-checked, so corrupt rows can only make the lookup fail (then the greedy runs).
struct StoredReceiveRows {
  int num_ranks;
  const char* const* rows;  // num_ranks - 1 rows of StragglarRoundLowerBound(num_ranks) characters.
};
constexpr const char* kReceiveRows63[] = {
    // BEGIN STORED RECEIVE ROWS 63
    "......5464646555555266646526661666626664636616666166661666616666555",
    "......6464646555555552666526665461666616666266626662666166661666655",
    ".....554255155535442554442551555155544415551555155515552554255.5555",
    "......6664646555555552666546266626661666636626661666616666166665555",
    "......6666546555555555546546266626663664636626662666166661666655555",
    "......6666646555555555546546526662666166661666626662666266626665555",
    ".....5.666665555555555555555555555546266654646465366366366366366465",
    ".....46.66666555555555555555555546464636646536636636636626662666555",
    ".....366.6666655555555546555536646463664646366366266626662666266655",
    ".....2666.666665555555546552666546463664646366166663662666266655555",
    ".....16666.66666555555546552666546166664646266636616666366266655555",
    ".....366366.6666655555554655536646464626664636636626663663662666555",
    ".....3662666.666665555554655536646464626664636636626662666366366555",
    ".....36616666.66666555554655536646463664646366366366266616666266655",
    ".....266616666.6666655546555526662666266646366366266626662666166665",
    ".....4626662666.666665555555555555464636646546366366366366366366555",
    ".....53662666366.66666555555555555546465465555465464646464636655465",
    ".....461666616666.6666655555555546464636646536646366266626663665555",
    ".....4636626662666.666665555555555536655166663663663664636636655465",
    ".....46366166662666.66666555555555536636654646463663663663663665546",
    ".....462666266616666.6666655555555526664654646462666366366366366546",
    ".....5266636626662666.666665555555546465464653665464646463664655465",
    ".....51666636626662666.66666555555546366266646465464636636636655465",
    ".....463663661666616666.6666655555536655266646463664636636636655465",
    ".....4636626661666616666.666665555536654654646463663663663663665546",
    ".....53663662666266616666.66666555546465465555546464646464646464646",
    ".....536626663661666616666.6666655546465465555546464646464646464646",
    ".....5266636626661666616666.666665546465464646465464636646463665465",
    ".....54636636636626663662666.66666554655465555546536646464646464646",
    ".....536636626662666266616666.6666646465465555546464646464646464646",
    ".....5464646366366266636616666.666664655555555555555554646464653665",
    ".....54636636636636626662666366.66666465465555546555366464646464646",
    ".....546464636636636636636616666.6666655555555555555555546464653665",
    "....3.646464636636646366366366366.666665555555555555555555554652666",
    ".....54646463662666366266636616666.66666555555555555546546464654646",
    ".....546463663663663662666166662666.6666655555546555546464646464646",
    ".....5463663663663663661666636616666.666665555546555464646464654646",
    "....3.6463664646366366366366366366366.66666555555555555555554652666",
    "....1.66636636636636636636636626662666.6666655555555555554646463665",
    "...2..655555546464646465536646463665555.666665555555555555555536646",
    "....2.6646464636636636626663662666266646.66666555555555555546463665",
    "....4.54646546464636646366366463663663665.6666655555555555555546366",
    "....4.555555546464646465464646463665554655.666665555555555555536646",
    "....2.6646464646366366366266646266616666366.66666555555555554652666",
    "....4.55555554646464646546464636646555465366.6666655555555555546366",
    "....3.646464646463663662666366366366266636646.666665555555555546465",
    "....4.5546464646464636636646366463662666516666.66666555555555546366",
    "...3..55555555464646464654646464646555526664646.6666655555555526665",
    "....4.555546464646464646366464646366554652666366.666665555555546366",
    "....4.4646464646463664636636646366366366366462666.66666555555546366",
    "....3.64646464646464646366366463663663663664616666.6666655555546366",
    "....4.555465464646464636636646366366554652666266646.666665555546366",
    "...2..6555555464646465465366464654655552666463664646.66666555526665",
    "....4.55555554646464646546464646366555465526662666366.6666655536646",
    "...1..665555546464646465464646463665554655266626663665.666665536646",
    ".1....5555555555555555555465465465555555555464654646465.66666516666",
    "...3..55555555554646464654646464646555536636646546464646.6666616666",
    "...3..555555555546464646546464646465555366366465464646366.666662666",
    "..1...6555555555555546465464654654655553663664654646464646.66666366",
    "...3..55555555555546464654646546546555536636646546464646366.6666646",
    "..2...555555555555554655546465465465555555546465464646464646.666665",
    "..2...5555555555555555555464655465555555555464654646464646465.66666",
    // END STORED RECEIVE ROWS 63
};
static_assert(std::size(kReceiveRows63) == 62, "one row per non-straggler rank");
constexpr StoredReceiveRows kStoredReceiveRows[] = {{63, kReceiveRows63}};

bool BuildFromReceiveRows(int n, const char* const* rows, PostArrivalSchedule& rounds) {
  const int m = n - 1, sigma = n - 1, num_rounds = StragglarRoundLowerBound(n);
  // copies[t]: (receiver, chunk) of every copy in round t.
  std::vector<std::vector<std::pair<int, int>>> copies(num_rounds);
  for (int r = 0; r < m; ++r) {
    const std::string_view row(rows[r]);
    if (row.size() != static_cast<size_t>(num_rounds)) return false;
    for (int t = 0; t < num_rounds; ++t) {
      const char ch = row[t];
      if (ch == '.') continue;
      const int age =
          ch >= '1' && ch <= '9' ? ch - '0' : (ch >= 'a' && ch <= 'z' ? ch - 'a' + 10 : 0);
      const int chunk = t - age;
      if (age == 0 || chunk < 0 || chunk >= m || chunk == r || t == r) return false;
      copies[t].push_back({r, chunk});
    }
  }
  // holds[r][c]: rank r holds final chunk c at the start of the current round.
  std::vector<std::vector<char>> holds(n, std::vector<char>(m, 0));
  std::vector<int> senders, sender_of, receiver_of, useful;
  std::vector<char> visited, wanted;
  rounds.assign(num_rounds, {});
  for (int t = 0; t < num_rounds; ++t) {
    // Youngest chunks first: they have the fewest holders.
    std::vector<std::pair<int, int>>& rx = copies[t];
    std::sort(rx.begin(), rx.end(), [](const std::pair<int, int>& a, const std::pair<int, int>& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    senders.clear();
    for (int s = 0; s < n; ++s) {
      if (t >= m || (s != t && s != sigma)) senders.push_back(s);
    }
    // useful[j]: how many of this round's wanted chunks sender j holds.
    wanted.assign(m, 0);
    for (const auto& [receiver, chunk] : rx) wanted[chunk] = 1;
    useful.assign(senders.size(), 0);
    for (size_t j = 0; j < senders.size(); ++j) {
      for (int c = 0; c < m; ++c) useful[j] += wanted[c] && holds[senders[j]][c];
    }
    sender_of.assign(rx.size(), -1);
    receiver_of.assign(senders.size(), -1);
    // Greedy start (the least useful free holder), then Kuhn's augmenting paths: every receiver
    // needs a distinct sender holding its chunk.
    for (size_t i = 0; i < rx.size(); ++i) {
      int best = -1;
      for (size_t j = 0; j < senders.size(); ++j) {
        if (receiver_of[j] >= 0 || !holds[senders[j]][rx[i].second]) continue;
        if (best < 0 || useful[j] < useful[best]) best = static_cast<int>(j);
      }
      if (best >= 0) {
        receiver_of[best] = static_cast<int>(i);
        sender_of[i] = best;
      }
    }
    auto augment = [&](auto&& self, int i) -> bool {
      for (size_t j = 0; j < senders.size(); ++j) {
        if (visited[j] || !holds[senders[j]][rx[i].second]) continue;
        visited[j] = 1;
        if (receiver_of[j] < 0 || self(self, receiver_of[j])) {
          receiver_of[j] = i;
          sender_of[i] = static_cast<int>(j);
          return true;
        }
      }
      return false;
    };
    for (size_t i = 0; i < rx.size(); ++i) {
      if (sender_of[i] >= 0) continue;
      visited.assign(senders.size(), 0);
      if (!augment(augment, static_cast<int>(i))) return false;
    }
    std::vector<ScheduleMove>& moves = rounds[t];
    if (t < m) {
      moves.push_back({t, sigma, t});
      moves.push_back({sigma, t, t});
    }
    for (size_t i = 0; i < rx.size(); ++i) {
      const auto [receiver, chunk] = rx[i];
      if (holds[receiver][chunk]) return false;  // A chunk may arrive only once.
      moves.push_back({senders[sender_of[i]], receiver, chunk});
    }
    for (const ScheduleMove& move : moves) holds[move.dst][move.chunk] = 1;
  }
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < m; ++c) {
      if (!holds[r][c]) return false;
    }
  }
  return true;
}

bool BuildStoredReceiveRows(int n, PostArrivalSchedule& rounds) {
  for (const StoredReceiveRows& stored : kStoredReceiveRows) {
    if (stored.num_ranks == n) return BuildFromReceiveRows(n, stored.rows, rounds);
  }
  return false;
}

}  // namespace

int CeilLog2(int value) {
  int log2_ceil = 0;
  while ((1 << log2_ceil) < value) ++log2_ceil;
  return log2_ceil;
}

int StragglarRoundLowerBound(int num_ranks) { return num_ranks - 2 + CeilLog2(num_ranks); }

absl::StatusOr<PostArrivalSchedule> SynthesizeStragglarPostArrival(int num_ranks) {
  if (num_ranks < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("StragglAR needs at least 2 ranks, got ", num_ranks));
  }
  PostArrivalSchedule rounds;
  const bool built =
      (num_ranks >= 4 && (num_ranks & (num_ranks - 1)) == 0 && BuildCyclic(num_ranks, rounds)) ||
      (num_ranks >= 4 && BuildStored(num_ranks, rounds)) ||
      BuildStoredReceiveRows(num_ranks, rounds);
  if (!built) rounds = BuildGreedy(num_ranks);
  // The builders place the exchanges of rounds 0..n-2; they are the only reductions.
  const int straggler = num_ranks - 1;
  for (int round = 0; round < static_cast<int>(rounds.size()); ++round) {
    for (ScheduleMove& move : rounds[round]) {
      move.reduce = round < straggler && (move.src == straggler || move.dst == straggler);
    }
  }
  return rounds;
}

}  // namespace stragglar
