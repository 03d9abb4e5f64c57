// Tests of the key files: keygen's files round-trip, the secret is 0600 and
// never overwritten, bad files and half-given flags are refused by name, a
// public key given as the secret one is named as such (issue 26).
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

TEST_CASE("a public key given as the secret key is called one, and chmod is never advised for it (issue 26)") {
  TempDir dir;
  std::string alice = (dir.path / "alice").string();
  REQUIRE(curvezmq::write_key_files(alice, *curvezmq::generate()).ok());
  // The .pub as keygen leaves it (0644): the mode check used to answer
  // first, advising chmod 600 alice.pub, which only made the next try use
  // the public key as the secret.
  auto pub = curvezmq::read_secret_key_file(alice + ".pub");
  REQUIRE(!pub.ok());
  CHECK(pub.status().code() == StatusCode::kInvalidArgument);
  CHECK(pub.status().message().find("is a public key") != std::string::npos);
  CHECK(pub.status().message().find(alice + ".key") != std::string::npos);
  CHECK(pub.status().message().find("chmod") == std::string::npos);
  // After following that advice: still refused, not read as a secret.
  ::chmod((alice + ".pub").c_str(), 0600);
  auto private_pub = curvezmq::read_secret_key_file(alice + ".pub");
  REQUIRE(!private_pub.ok());
  CHECK(private_pub.status().message().find("is a public key") != std::string::npos);
  // Through SWEPT_KEY, as the attack did it.
  ::setenv("SWEPT_KEY", (alice + ".pub").c_str(), 1);
  auto through_env = curvezmq::client_keys("", alice + ".pub");
  ::unsetenv("SWEPT_KEY");
  CHECK(through_env.status().message().find("is a public key") != std::string::npos);

  // A .key file that holds its own .pub's key (cp alice.pub alice.key) is
  // a public key too, whatever its mode.
  std::string bob = (dir.path / "bob").string();
  REQUIRE(curvezmq::write_key_files(bob, *curvezmq::generate()).ok());
  fs::copy_file(bob + ".pub", bob + ".key", fs::copy_options::overwrite_existing);
  ::chmod((bob + ".key").c_str(), 0644);
  auto copied = curvezmq::read_secret_key_file(bob + ".key");
  REQUIRE(!copied.ok());
  CHECK(copied.status().message().find("public key") != std::string::npos);
  CHECK(copied.status().message().find("chmod") == std::string::npos);

  // A real secret key with a loose mode still gets the chmod advice.
  std::string carol = (dir.path / "carol").string();
  REQUIRE(curvezmq::write_key_files(carol, *curvezmq::generate()).ok());
  ::chmod((carol + ".key").c_str(), 0640);
  CHECK(curvezmq::read_secret_key_file(carol + ".key").status().message().find("chmod 600") != std::string::npos);
}
