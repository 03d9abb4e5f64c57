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
  // Admitted and heard once more (a heartbeat; `work`: a trial message), as
  // an agent that stays does: its row is written then on an unkeyed scheduler.
  AgentSession& join(const std::string& rid, const Register& r, bool work = false) {
    auto a = admit(rid, r);
    REQUIRE(a.session != nullptr);
    REQUIRE(agents->confirmed(*a.session, work).ok());
    return *a.session;
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
  // Unkeyed: no row, and no work, until it says something after REGISTER.
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a'") == 0);
  CHECK(u.agents->held(*a.session));
  REQUIRE(u.agents->confirmed(*a.session, false).ok());
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a'") == 1);
  CHECK(!u.agents->held(*a.session));
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
  u.join("c1", Unit::reg("a"), /*work=*/true);
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
  u.join("c1", Unit::reg("a"));
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
  AgentSession& s = u.join("c1", Unit::reg("a"));
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

TEST_CASE("agent registry: one live agent per key, a pool key up to its limit, names as before") {
  auto keys = std::make_shared<KeyRing>("unused");
  keys->add_fixed("key-one", KeyRing::Entry{KeyRole::kAgent, "agents/one.pub"});
  keys->add_fixed("key-pool", KeyRing::Entry{KeyRole::kAgent, "agents/pool.pub", 2});
  AgentRegistryOptions options;
  options.keys = keys;
  options.heartbeat_ms = 100;
  options.liveness = 3;
  Unit u(options);
  REQUIRE(!u.admit("c1", Unit::reg("a", "h1", 1), "key-one").reject);
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='a'") == 1);  // keyed: recorded at once
  // A second name on the same key while the first lives: refused, and told
  // what to do; through the throttled log (a key holder can repeat it).
  auto second = u.admit("c2", Unit::reg("b", "h2", 2), "key-one");
  REQUIRE(second.reject);
  CHECK(second.reject->code == "key_in_use");
  CHECK(second.reject->message.find("agents/one.max") != std::string::npos);
  CHECK(second.reject->retry_after_ms == 300);
  CHECK(second.throttled);
  CHECK(!u.agents->connected("b"));
  // Its own name again from the same process on a new connection: a reconnect.
  REQUIRE(!u.admit("c3", Unit::reg("a", "h1", 1), "key-one").reject);
  // Once the first has gone, the key may register another name.
  REQUIRE(u.agents->remove("c3", AgentState::kGone).ok());
  CHECK(!u.admit("c2", Unit::reg("b", "h2", 2), "key-one").reject);
  // A pool key: two live names, not three.
  CHECK(!u.admit("p1", Unit::reg("p1", "h", 11), "key-pool").reject);
  CHECK(!u.admit("p2", Unit::reg("p2", "h", 12), "key-pool").reject);
  CHECK(u.refusal("p3", Unit::reg("p3", "h", 13), "key-pool") == "key_in_use");
}

TEST_CASE("agent registry: unkeyed REGISTERs are rate-limited and leave no row until heard again") {
  AgentRegistryOptions options;
  options.unkeyed_registers_per_s = 10;
  options.unkeyed_register_burst = 5;
  Unit u(options);
  int admitted = 0, throttled = 0;
  for (int i = 0; i < 50; ++i) {
    auto a = u.admit("raw" + std::to_string(i), Unit::reg("raw" + std::to_string(i), "h", 100 + i));
    if (a.session) ++admitted;
    if (a.reject && a.reject->code == "throttled") ++throttled;
  }
  CHECK(admitted == 5);  // the burst
  CHECK(throttled == 45);
  CHECK(u.q("SELECT COUNT(*) FROM agents") == 0);  // none said anything more
  // Re-registering on its own connection costs nothing.
  CHECK(u.refusal("raw0", Unit::reg("raw0", "h", 100)).empty());
  // The bucket refills with time: 10 a second.
  u.clock.advance_ms(200);
  CHECK(u.refusal("late1", Unit::reg("late1", "h", 201)).empty());
  CHECK(u.refusal("late2", Unit::reg("late2", "h", 202)).empty());
  CHECK(u.refusal("late3", Unit::reg("late3", "h", 203)) == "throttled");
  // The silent ones go without a row ever written.
  u.clock.advance_ms(10000);
  for (const std::string& rid : u.agents->silent()) REQUIRE(u.agents->remove(rid, AgentState::kLost).ok());
  CHECK(u.q("SELECT COUNT(*) FROM agents") == 0);
}

TEST_CASE("agent registry: an agent that leaves having run nothing takes its row along, one that ran keeps it") {
  Unit u;
  u.join("c1", Unit::reg("idle", "h", 1));
  u.join("c2", Unit::reg("busy", "h", 2), /*work=*/true);
  CHECK(u.q("SELECT COUNT(*) FROM agents") == 2);
  REQUIRE(u.agents->remove("c1", AgentState::kGone).ok());
  REQUIRE(u.agents->remove("c2", AgentState::kGone).ok());
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='idle'") == 0);
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='busy' AND state='gone'") == 1);
  // A row that was there before this session (it ran in an earlier one) stays.
  u.join("c3", Unit::reg("busy", "h", 3));
  REQUIRE(u.agents->remove("c3", AgentState::kGone).ok());
  CHECK(u.q("SELECT COUNT(*) FROM agents WHERE name='busy' AND state='gone'") == 1);
}
