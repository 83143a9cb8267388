#include "exporters/build_info.h"

#include "prometheus/gauge.h"

namespace stragglar {

void ExportBuildInfo(prometheus::Registry& registry, const BuildInfo& info, const std::string& comm,
                     const std::vector<int>& ranks) {
  auto& family =
      prometheus::BuildGauge()
          .Name("stragglar_build_info")
          .Help("Always 1; the labels say which stragglar version runs over which library version")
          .Register(registry);
  for (int rank : ranks) {
    family
        .Add({{"comm", comm},
              {"rank", std::to_string(rank)},
              {"version", info.version},
              {"backend", info.backend},
              {"backend_version", info.backend_version}})
        .Set(1);
  }
}

}  // namespace stragglar
