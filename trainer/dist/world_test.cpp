// world_from_env: the environment contract of multi-process runs (world.h),
// variable by variable, including the refusals that make swept-train exit 2.
#include <doctest/doctest.h>

#include <map>

#include "trainer/dist/world.h"

using namespace swept::trainer;

namespace {

EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(std::map<std::string, std::string> vars) {
  swept::Result<World> w = world_from_env(env(std::move(vars)));
  REQUIRE(!w.ok());
  CHECK(w.status().code() == swept::StatusCode::kInvalidArgument);
  return w.status().message();
}

}  // namespace

TEST_CASE("trainer dist: no variables is one process") {
  swept::Result<World> w = world_from_env(env({}));
  REQUIRE(w.ok());
  CHECK(w->size == 1);
  CHECK(w->rank == 0);
  CHECK(!w->distributed());
  CHECK(w->timeout == std::chrono::seconds(300));
}

TEST_CASE("trainer dist: torchrun's variables, with defaults for the local ones and the port") {
  swept::Result<World> w = world_from_env(
      env({{"WORLD_SIZE", "8"}, {"RANK", "5"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
           {"MASTER_ADDR", "10.0.0.5"}, {"GLOO_SOCKET_IFNAME", "eth1,eth2"}, {"SWEPT_RENDEZVOUS_TIMEOUT", "2.5"}}));
  REQUIRE(w.ok());
  CHECK(w->size == 8);
  CHECK(w->rank == 5);
  CHECK(w->local_rank == 1);
  CHECK(w->local_size == 4);
  CHECK(w->master_addr == "10.0.0.5");
  CHECK(w->master_port == 29500);
  CHECK(w->socket_ifname == "eth1");
  CHECK(w->timeout == std::chrono::milliseconds(2500));
  CHECK(w->source == "torchrun");

  swept::Result<World> one = world_from_env(env({{"WORLD_SIZE", "1"}, {"RANK", "0"}}));
  REQUIRE(one.ok());  // WORLD_SIZE=1 needs no MASTER_ADDR
  CHECK(!one->distributed());
}

TEST_CASE("trainer dist: Slurm's variables count only without RANK and with MASTER_ADDR") {
  swept::Result<World> w = world_from_env(env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                                               {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29517"}}));
  REQUIRE(w.ok());
  CHECK(w->size == 4);
  CHECK(w->rank == 3);
  CHECK(w->local_rank == 1);
  CHECK(w->master_port == 29517);
  CHECK(w->source == "slurm");

  // A trial started by a swept agent that is itself an srun task.
  swept::Result<World> agent_child = world_from_env(env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}}));
  REQUIRE(agent_child.ok());
  CHECK(agent_child->size == 1);

  // RANK wins over Slurm's.
  swept::Result<World> both = world_from_env(env(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"MASTER_ADDR", "h"}}));
  REQUIRE(both.ok());
  CHECK(both->size == 2);
  CHECK(both->rank == 0);
}

TEST_CASE("trainer dist: bad combinations are refused with the variable named") {
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "h"}}).find("RANK=2 is not below WORLD_SIZE=2") !=
        std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}}).find("WORLD_SIZE is set but RANK is not") != std::string::npos);
  CHECK(error_of({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "0"}, {"RANK", "0"}}).find("WORLD_SIZE=\"0\"") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "two"}, {"RANK", "0"}}).find("WORLD_SIZE=\"two\"") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "-1"}}).find("RANK=\"-1\"") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "1"}}).find("MASTER_ADDR is not set") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
            .find("MASTER_PORT") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "4"}, {"RANK", "1"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "h"}})
            .find("LOCAL_RANK=\"2\"") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_WORLD_SIZE", "3"}, {"MASTER_ADDR", "h"}})
            .find("LOCAL_WORLD_SIZE") != std::string::npos);
  CHECK(error_of({{"SWEPT_RENDEZVOUS_TIMEOUT", "0"}}).find("SWEPT_RENDEZVOUS_TIMEOUT") != std::string::npos);
  CHECK(error_of({{"SWEPT_RENDEZVOUS_TIMEOUT", "5s"}}).find("SWEPT_RENDEZVOUS_TIMEOUT") != std::string::npos);
}
