// run_command: a shell command's standard output, for the search benchmarks
// that ask their peer programs (search_peer.py and the like) for spaces,
// values and Optuna's results. Empty when the command cannot be started.
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace swept::bench {

inline std::string run_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  return out;
}

}  // namespace swept::bench
