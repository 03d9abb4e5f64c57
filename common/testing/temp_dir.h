// The tests' one temporary directory (target swept_test_support, test code
// only): a fresh directory under $TMPDIR, removed with everything in it when
// the TempDir goes. Tests that need a database file, a work directory or a
// socket path take it from here.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace swept::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "swept-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made (callers REQUIRE it).
  const std::string& path() const { return path_; }
  // A path inside it: dir / "swept.db".
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace swept::testing
