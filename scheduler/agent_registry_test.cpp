// Tests of the agent registry alone: no sockets, a real SQLite file (the
// Writer, as the scheduler uses it) and a FakeClock that only the test
// moves, so liveness and stalls are crossed by advancing it. Routing ids are
// made-up strings: the registry only keys on them.
#include "scheduler/agent_registry.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "store/test_support.h"

using namespace swept;
using namespace swept::scheduler;
using namespace swept::protocol;

namespace {

using store::testing::TempDb;

struct Unit {
  TempDb db;
  FakeClock clock;
  std::unique_ptr<store::Writer> store;
  std::unique_ptr<AgentRegistry> agents;

  explicit Unit(AgentRegistryOptions options = {}) {
    auto w = store::Writer::open(db.path);
    REQUIRE(w.ok());
    store = std::move(*w);
    agents = std::make_unique<AgentRegistry>(*store, clock, std::move(options));
  }
  static Register reg(const std::string& name, const std::string& host = "h", int64_t pid = 1) {
    Register r;
    r.name = name;
    r.host = host;
    r.pid = pid;
    r.slots = 2;
    r.session = "s-" + name;
    return r;
  }
  AgentRegistry::Admission admit(const std::string& rid, const Register& r, const std::string& key = "") {
    auto a = agents->admit(rid, r, key);
    REQUIRE(a.ok());
    return *a;
  }
  std::string refusal(const std::string& rid, const Register& r, const std::string& key = "") {
    auto a = admit(rid, r, key);
    return a.reject ? a.reject->code : std::string();
  }
  int64_t q(const std::string& sql) {
    if (store->in_transaction()) REQUIRE(store->commit().ok());
    return store::testing::query_int(db.path, sql);
  }
};

}  // namespace

TEST_CASE("agent registry: an agent registers once per connection and its row is stored") {
  Unit u;
  auto a = u.admit("c1", Unit::reg("a"));
  REQUIRE(a.session != nullptr);
  CHECK(!a.reject);
  CHECK(u.agents->connected("a"));
  CHECK(u.agents->by_name("a")->routing_id == "c1");
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a'") == 1);
  CHECK(u.agents->take_changed());
  // The same name again on its connection: a re-registration, kept.
  CHECK(u.refusal("c1", Unit::reg("a")).empty());
  // Another name on the same connection: refused, through the throttled log.
  auto second = u.admit("c1", Unit::reg("b"));
  REQUIRE(second.reject);
  CHECK(second.reject->code == "one_agent_per_connection");
  CHECK(second.throttled);
  CHECK(!u.agents->connected("b"));
  // What placement relies on is checked first.
  Register bad = Unit::reg("c");
  bad.gpus = {GpuInfo{0, "u0", "g", 1}, GpuInfo{0, "u1", "g", 1}};
  CHECK(u.refusal("c2", bad) == "bad_request");
}

TEST_CASE("agent registry: a second live agent of one name is refused, a reconnect or a silent one is replaced") {
  AgentRegistryOptions options;
  options.heartbeat_ms = 100;
  options.liveness = 3;
  Unit u(options);
  REQUIRE(!u.admit("c1", Unit::reg("a", "h1", 10)).reject);
  // Another process under the same name while the first is heard: refused,
  // told when to try again (a liveness period).
  auto dup = u.admit("c2", Unit::reg("a", "h2", 20));
  REQUIRE(dup.reject);
  CHECK(dup.reject->code == "duplicate_name");
  CHECK(dup.reject->retry_after_ms == 300);
  // The same process (host and pid) on a new connection takes over at once.
  REQUIRE(!u.admit("c3", Unit::reg("a", "h1", 10)).reject);
  CHECK(u.agents->by_routing("c1") == nullptr);
  CHECK(u.agents->by_name("a")->routing_id == "c3");
  // Silent past liveness: listed, and another process may take the name.
  u.clock.advance_ms(301);
  CHECK(u.agents->silent() == std::vector<std::string>{"c3"});
  REQUIRE(!u.admit("c4", Unit::reg("a", "h2", 20)).reject);
  CHECK(u.agents->silent().empty());
}

TEST_CASE("agent registry: a stalled loop does not count against the agents, going away is stored") {
  AgentRegistryOptions options;
  options.heartbeat_ms = 100;
  options.liveness = 3;
  Unit u(options);
  REQUIRE(!u.admit("c1", Unit::reg("a")).reject);
  u.clock.advance_ms(1000);
  u.agents->excuse_stall(u.clock.now_ms(), 900);  // the loop was away 900 ms of the 1000
  CHECK(u.agents->silent().empty());
  u.clock.advance_ms(250);
  CHECK(u.agents->silent() == std::vector<std::string>{"c1"});
  auto gone = u.agents->remove("c1", AgentState::kLost);
  REQUIRE(gone.ok());
  REQUIRE(gone->has_value());
  CHECK((*gone)->name == "a");
  CHECK(!u.agents->connected("a"));
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a' AND state='lost'") == 1);
  auto again = u.agents->remove("c1", AgentState::kLost);
  REQUIRE(again.ok());
  CHECK(!again->has_value());
}

TEST_CASE("agent registry: host faults in a row quarantine an agent until an operator releases it") {
  AgentRegistryOptions options;
  options.quarantine_after = 2;
  Unit u(options);
  REQUIRE(!u.admit("c1", Unit::reg("a")).reject);
  const AgentSession& s = *u.agents->by_name("a");
  REQUIRE(u.agents->note_host_fault("a", "disk full").ok());
  u.agents->note_host_ok("a");  // a trial that ran breaks the streak
  REQUIRE(u.agents->note_host_fault("a", "disk full").ok());
  CHECK(!u.agents->quarantined("a"));
  (void)u.agents->take_changed();
  REQUIRE(u.agents->note_host_fault("a", "disk full").ok());
  CHECK(u.agents->quarantined("a"));
  CHECK(u.agents->held(s));
  CHECK(u.agents->quarantine_reason("a") == "2 host faults in a row, the last: disk full");
  CHECK(u.agents->take_changed());
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a' AND quarantine IS NOT NULL") == 1);
  auto released = u.agents->release("a");
  REQUIRE(released.ok());
  CHECK(*released);
  CHECK(!u.agents->held(s));
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a' AND quarantine IS NULL") == 1);
  auto twice = u.agents->release("a");
  REQUIRE(twice.ok());
  CHECK(!*twice);
}

TEST_CASE("agent registry: a failed self-check quarantines, a passing one lifts it, quarantines survive a restart") {
  Unit u;
  REQUIRE(!u.admit("c1", Unit::reg("a")).reject);
  AgentSession& s = *u.agents->by_routing("c1");
  REQUIRE(u.agents->note_health(s, false, "work directory not writable").ok());
  CHECK(u.agents->quarantine_reason("a") == "its self-check failed: work directory not writable");
  // Still failing: stays. A draining agent is held back too.
  REQUIRE(u.agents->note_health(s, false, "work directory not writable").ok());
  CHECK(u.agents->quarantined("a"));
  REQUIRE(u.store->commit().ok());
  // A restarted scheduler holds it back from what the store says.
  AgentRegistry after(*u.store, u.clock, {});
  REQUIRE(after.recover().ok());
  CHECK(after.quarantined("a"));
  REQUIRE(u.agents->note_health(s, true, "").ok());
  CHECK(!u.agents->quarantined("a"));
  u.agents->note_draining(s, true);
  CHECK(u.agents->held(s));
}

TEST_CASE("agent registry: on a keyed scheduler a name belongs to the key that registered it first") {
  auto keys = std::make_shared<KeyRing>("unused");
  keys->add_fixed("key-one", KeyRing::Entry{KeyRole::kAgent, "agents/one.pub"});
  keys->add_fixed("key-two", KeyRing::Entry{KeyRole::kAgent, "agents/two.pub"});
  AgentRegistryOptions options;
  options.keys = keys;
  Unit u(options);
  REQUIRE(!u.admit("c1", Unit::reg("a"), "key-one").reject);
  CHECK(u.agents->by_name("a")->key == "key-one");
  // Another key may not take the name, live or not.
  CHECK(u.refusal("c2", Unit::reg("a"), "key-two") == "name_taken");
  REQUIRE(u.agents->remove("c1", AgentState::kGone).ok());
  CHECK(u.refusal("c2", Unit::reg("a"), "key-two") == "name_taken");
  // Its key revoked (forgotten): the name is free.
  u.agents->forget_key("a");
  CHECK(u.refusal("c2", Unit::reg("a"), "key-two").empty());
}
