// Tests of the key files: keygen's files round-trip, the secret is 0600 and
// never overwritten, bad files and half-given flags are refused by name.
#include "common/curvezmq.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace swept;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/swept-curve-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("keygen's files round-trip, the secret is 0600 and is never overwritten") {
  TempDir dir;
  std::string prefix = (dir.path / "alice").string();
  auto keys = curvezmq::generate();
  REQUIRE(keys.ok());
  CHECK(keys->public_key.size() == curvezmq::kZ85KeyLength);
  CHECK(keys->public_key != keys->secret_key);
  REQUIRE(curvezmq::write_key_files(prefix, *keys).ok());
  struct stat st;
  REQUIRE(::stat((prefix + ".key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto back = curvezmq::read_secret_key_file(prefix + ".key");
  REQUIRE(back.ok());
  CHECK(back->secret_key == keys->secret_key);
  CHECK(back->public_key == keys->public_key);  // derived from the secret
  auto pub = curvezmq::read_public_key_file(prefix + ".pub");
  REQUIRE(pub.ok());
  CHECK(*pub == keys->public_key);

  auto other = curvezmq::generate();
  REQUIRE(other.ok());
  Status again = curvezmq::write_key_files(prefix, *other);
  CHECK(again.code() == StatusCode::kInvalidArgument);
  CHECK(again.message().find("already exists") != std::string::npos);
  CHECK(curvezmq::read_secret_key_file(prefix + ".key")->secret_key == keys->secret_key);  // untouched
}

TEST_CASE("a secret key readable by others, a non-key and a missing file are refused by name") {
  TempDir dir;
  std::string prefix = (dir.path / "k").string();
  REQUIRE(curvezmq::write_key_files(prefix, *curvezmq::generate()).ok());
  ::chmod((prefix + ".key").c_str(), 0644);
  auto loose = curvezmq::read_secret_key_file(prefix + ".key");
  CHECK(loose.status().message().find("chmod 600") != std::string::npos);

  std::ofstream(dir.path / "junk.pub") << "not a key\n";
  auto junk = curvezmq::read_public_key_file((dir.path / "junk.pub").string());
  CHECK(junk.status().code() == StatusCode::kInvalidArgument);
  CHECK(junk.status().message().find("junk.pub") != std::string::npos);
  CHECK(!curvezmq::read_public_key_file((dir.path / "missing.pub").string()).ok());
}

TEST_CASE("client keys: both flags or neither, one alone says which is missing") {
  ::unsetenv("SWEPT_KEY");
  ::unsetenv("SWEPT_SCHEDULER_PUB");
  auto none = curvezmq::client_keys("", "");
  REQUIRE(none.ok());
  CHECK(!none->enabled());
  CHECK(curvezmq::client_keys("a.key", "").status().message().find("--scheduler-pub") != std::string::npos);
  CHECK(curvezmq::client_keys("", "s.pub").status().message().find("--key") != std::string::npos);

  TempDir dir;
  std::string me = (dir.path / "me").string(), sched = (dir.path / "sched").string();
  REQUIRE(curvezmq::write_key_files(me, *curvezmq::generate()).ok());
  REQUIRE(curvezmq::write_key_files(sched, *curvezmq::generate()).ok());
  ::setenv("SWEPT_KEY", (me + ".key").c_str(), 1);
  ::setenv("SWEPT_SCHEDULER_PUB", (sched + ".pub").c_str(), 1);
  auto from_env = curvezmq::client_keys("", "");
  ::unsetenv("SWEPT_KEY");
  ::unsetenv("SWEPT_SCHEDULER_PUB");
  REQUIRE(from_env.ok());
  CHECK(from_env->enabled());
  CHECK(from_env->server_public == *curvezmq::read_public_key_file(sched + ".pub"));
}
