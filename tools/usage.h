// `stragglar --help`: every command and its flags (README's "Commands" says what each does).
#pragma once

namespace stragglar {

inline constexpr char kUsage[] = R"(stragglar: AllReduce plans for a persistent straggler

usage:
  stragglar plan --algorithm ring|halving-doubling|stragglar|stragglar-log-depth
                 (--ranks N | --topology NxG) [--straggler S] [--pieces K] [--json]
  stragglar sim (--ranks N | --topology NxG) --bytes SIZE [--alpha 3us] [--bandwidth 450GiB/s]
                [--inter-alpha 10us] [--inter-bandwidth 50GB/s] [--delay D] [--straggler S]
                [--algorithms ring,halving-doubling,stragglar,stragglar-log-depth,
                              stragglar-hierarchical,ring-hierarchical,nccl-ring,nccl-tree]
                [--queues rounds|per-class] [--json] [--progress]
  stragglar verify --plan FILE|-
  stragglar rounds [--min-ranks 2] [--max-ranks 64] [--verify] [--json] [--progress]
  stragglar run [--ranks 8 | --topology NxG [--inter-alpha 10us] [--inter-bandwidth 50GB/s]
                                            [--queues rounds|per-class]]
                [--straggler 5|none] [--delay 20ms] [--bytes 16MiB] [--iterations 256]
                [--dtype float32] [--seed 1] [--epoch-calls 32] [--algorithms ring,stragglar]
                [--summary-json FILE] [--trace FILE] [--trace-json FILE]
                [--metrics-port P] [--metrics-addr A] [--metrics-hold 0s]
  stragglar replay --trace FILE|- [--epoch-calls 32] [--exchange immediate|deferred]
                   [--lags arrival|duration] [--alpha 3us] [--bandwidth 450GiB/s] [--json]
  stragglar scenarios [--calls 20000] [--noise-calls 100000] [--epoch-calls 32] [--seed 1]
                      [--ranks 8] [--bytes 256MiB] [--alpha 3us] [--bandwidth 450GiB/s] [--json]
  stragglar pipeline --stages S --microbatches M --forward 10ms[,...] --backward 20ms[,...]
                     [--link-delay I-J:DELAY ...] [--memory-microbatches K] [--blocking-sends]
                     [--json]
  stragglar pipeline-run --stages S --microbatches M --forward 2ms[,...] --backward 4ms[,...]
                         [--link-delay I-J:DELAY ...] [--memory-microbatches K] [--iterations 16]
                         [--delay-from 3] [--bytes 16MiB] [--advice-file FILE] [--apply-advice]
                         [--metrics-port P] [--metrics-addr A] [--metrics-hold 0s]
  stragglar doctor [--preload nccl|mpi|any] [--local-ranks 8]
  stragglar --version

Sizes accept B, KiB, MiB, GiB (and KB, MB, GB); times accept ns, us, ms, s.
)";

}  // namespace stragglar
