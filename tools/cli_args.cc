#include "tools/cli_args.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/units.h"

namespace stragglar {

std::vector<std::string> NormalizedArguments(int argc, char** argv, int first,
                                             const std::vector<absl::string_view>& repeatable) {
  std::vector<std::string> args;
  std::map<std::string, std::vector<std::string>> values;  // per repeatable flag, in order
  for (int i = first; i < argc; ++i) {
    std::string arg = NormalizeFlagName(argv[i]);
    bool joined = false;
    for (absl::string_view name : repeatable) {
      const std::string flag = absl::StrCat("--", name);
      if (arg == flag && i + 1 < argc) {
        values[flag].push_back(argv[++i]);
        joined = true;
      } else if (absl::StartsWith(arg, flag + "=")) {
        values[flag].push_back(arg.substr(flag.size() + 1));
        joined = true;
      }
    }
    // "--plan -" (stdin) as "--plan=-": absl reads it either way, but warns on stderr about a
    // value that looks like a flag ("RAW: Did you really mean ...").
    if (!joined && absl::StartsWith(arg, "--") && !absl::StrContains(arg, '=') && i + 1 < argc &&
        absl::string_view(argv[i + 1]) == "-") {
      absl::StrAppend(&arg, "=-");
      ++i;
    }
    if (!joined) args.push_back(std::move(arg));
  }
  for (const auto& [flag, list] : values) {
    args.push_back(absl::StrCat(flag, "=", absl::StrJoin(list, ",")));
  }
  return args;
}

}  // namespace stragglar
