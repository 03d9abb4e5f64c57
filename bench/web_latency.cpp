// web_latency: API latency of the dashboard server over a large database
// (made by bench/web_gen), p50/p99 per main query, measured end to end over
// HTTP on loopback while a writer thread plays the scheduler (inserting metric
// batches into the same WAL database every 100 ms).
//
//   web_latency --db PATH [--runs 40] [--no-writer]
//
// The peer, measured in the same run: what a dashboard without paging does
// on each refresh, i.e. reading the largest sweep's trials whole (id, state,
// params, metric) straight from SQLite, without even the HTTP/JSON cost. The
// last column reports each endpoint's p99 as a fraction of that peer's p50.
// Prints a Markdown table (docs/benchmarks.md, "Dashboard").
#include <httplib.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/states.h"
#include "web/server.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

std::vector<long long> ids(sqlite3* db, const char* sql) {
  std::vector<long long> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "web_latency: %s: %s\n", sql, sqlite3_errmsg(db));
    std::exit(1);
  }
  while (sqlite3_step(st) == SQLITE_ROW) out.push_back(sqlite3_column_int64(st, 0));
  sqlite3_finalize(st);
  return out;
}

// The machine's 1-minute load average: benchmarks here share 2 cores with builds.
std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[64] = {0};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  return s.substr(0, s.find(' '));
}

std::string join(const std::vector<long long>& v) {
  std::string s;
  for (auto x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// Plays the scheduler: every 100 ms one transaction of metric rows for the
// running trials (upserts, as the store does), until stopped.
void writer_loop(const std::string& path, std::vector<long long> running, std::atomic<bool>* stop, long long* rows) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO metrics VALUES (?, 'loss', ?, ?)", -1, &ins, nullptr);
  sqlite3_stmt* lat = nullptr;
  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO trial_latest VALUES (?, 'loss', ?, ?)", -1, &lat, nullptr);
  long long step = 1000000;
  while (!stop->load()) {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    for (int k = 0; k < 10; ++k, ++step) {
      for (long long id : running) {
        sqlite3_bind_int64(ins, 1, id);
        sqlite3_bind_int64(ins, 2, step);
        sqlite3_bind_double(ins, 3, 0.5);
        sqlite3_step(ins);
        sqlite3_reset(ins);
        ++*rows;
      }
    }
    for (long long id : running) {
      sqlite3_bind_int64(lat, 1, id);
      sqlite3_bind_int64(lat, 2, step);
      sqlite3_bind_double(lat, 3, 0.5);
      sqlite3_step(lat);
      sqlite3_reset(lat);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(lat);
  sqlite3_close(db);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int runs = 40;
  bool writer = true;
  for (int a = 1; a < argc; ++a) {
    std::string k = argv[a];
    if (k == "--db" && a + 1 < argc) path = argv[++a];
    else if (k == "--runs" && a + 1 < argc) runs = std::max(5, std::atoi(argv[++a]));
    else if (k == "--no-writer") writer = false;
    else {
      std::cerr << "usage: web_latency --db PATH [--runs N] [--no-writer]\n";
      return 2;
    }
  }
  if (path.empty()) {
    std::cerr << "web_latency: --db is required (make one with web_gen)\n";
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::cerr << "web_latency: cannot open " << path << "\n";
    return 1;
  }
  long long big_sweep = ids(db, "SELECT sweep_id FROM trials GROUP BY sweep_id ORDER BY count(*) DESC LIMIT 1").at(0);
  long long sweep_trials = ids(db, ("SELECT count(*) FROM trials WHERE sweep_id = " + std::to_string(big_sweep)).c_str()).at(0);
  const std::string running_sql = "SELECT id FROM trials WHERE state = '" +
                                  std::string(swept::name(swept::TrialState::kRunning)) + "' ORDER BY id LIMIT 256";
  std::vector<long long> running = ids(db, running_sql.c_str());
  std::vector<long long> longest = ids(db, "SELECT trial_id FROM trial_latest WHERE name = 'loss' ORDER BY step DESC LIMIT 10");
  long long total_rows = ids(db, "SELECT count(*) FROM metrics").at(0);

  swept::web::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = path;
  auto server = swept::web::Server::start(options);
  if (!server.ok()) {
    std::cerr << "web_latency: " << server.status().ToString() << "\n";
    return 1;
  }
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_read_timeout(60, 0);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);

  std::atomic<bool> stop{false};
  long long written = 0;
  std::thread writer_thread;
  std::vector<long long> writing(running.begin(), running.begin() + std::min<size_t>(running.size(), 64));
  if (writer) writer_thread = std::thread(writer_loop, path, writing, &stop, &written);

  std::string s = "/api/sweeps/" + std::to_string(big_sweep);
  std::vector<std::pair<std::string, std::string>> queries = {
      {"sweeps list", "/api/sweeps"},
      {"one sweep (counts, best)", s},
      {"trials page 1 (by index)", s + "/trials?limit=50"},
      {"trials sorted by metric, desc", s + "/trials?limit=50&sort=metric&order=desc"},
      {"trials sorted by param:lr", s + "/trials?limit=50&sort=param:lr"},
      {"trials sorted by param:model.dropout, offset 20000", s + "/trials?limit=50&offset=20000&sort=param:model.dropout"},
      {"trials sorted by metric:accuracy", s + "/trials?limit=50&sort=metric:accuracy&order=desc"},
      {"trials filtered state=running", s + "/trials?limit=50&state=running"},
      {"trials deep page (offset 45000)", s + "/trials?limit=50&offset=45000"},
      {"one trial (detail, 2 long series)", "/api/trials/" + std::to_string(longest.at(0))},
      {"series of 10 long trials (400 pts)", "/api/series?metric=loss&points=400&trials=" + join(longest)},
      {"series of 20 running trials", "/api/series?metric=loss&points=400&trials=" +
                                          join(std::vector<long long>(running.begin(), running.begin() + std::min<size_t>(20, running.size())))},
      {"points (parallel coords/scatter)", s + "/points?limit=1000"},
      {"parameter importance", s + "/importance"},
      {"agents and GPUs", "/api/agents"},
  };

  // Peer: the whole sweep read from SQLite, as a dashboard without paging would.
  std::vector<double> peer;
  for (int r = 0; r < std::max(5, runs / 4); ++r) {
    sqlite3_stmt* st = nullptr;
    auto t = Clock::now();
    sqlite3_prepare_v2(db, "SELECT id, state, params, metric_value FROM trials WHERE sweep_id = ?", -1, &st, nullptr);
    sqlite3_bind_int64(st, 1, big_sweep);
    size_t bytes = 0;
    while (sqlite3_step(st) == SQLITE_ROW) bytes += static_cast<size_t>(sqlite3_column_bytes(st, 2));
    sqlite3_finalize(st);
    peer.push_back(ms_since(t));
    (void)bytes;
  }
  double peer_p50 = percentile(peer, 0.5);

  std::printf("database: %s, largest sweep %lld with %lld trials, %lld metric rows, writer %s, load average %s\n\n",
              path.c_str(), big_sweep, sweep_trials, total_rows, writer ? "on (every 100 ms)" : "off",
              load_average().c_str());
  std::printf("| query | p50 ms | p99 ms | bytes | p99 / peer p50 |\n|---|---:|---:|---:|---:|\n");
  bool all_ok = true;
  double worst = 0;
  for (const auto& [name, url] : queries) {
    std::vector<double> times;
    size_t bytes = 0;
    for (int r = 0; r < runs + 3; ++r) {
      auto t = Clock::now();
      auto res = client.Get(url.c_str());
      double ms = ms_since(t);
      if (!res || res->status != 200) {
        std::fprintf(stderr, "web_latency: %s -> %s\n", url.c_str(), res ? res->body.substr(0, 300).c_str() : "no response");
        all_ok = false;
        break;
      }
      bytes = res->body.size();
      if (r >= 3) times.push_back(ms);  // the first runs warm the page cache
    }
    if (times.empty()) continue;
    double p99 = percentile(times, 0.99);
    worst = std::max(worst, p99);
    std::printf("| %s | %.1f | %.1f | %zu | %.2f |\n", name.c_str(), percentile(times, 0.5), p99, bytes, p99 / peer_p50);
  }
  std::printf("| peer: whole sweep from SQLite, no HTTP/JSON | %.1f | %.1f | | 1 |\n", peer_p50, percentile(peer, 0.99));
  std::printf("\nworst p99: %.1f ms (target < 100 ms); writer inserted %lld metric rows meanwhile; load average %s\n",
              worst, written, load_average().c_str());
  stop = true;
  if (writer_thread.joinable()) writer_thread.join();
  (*server)->stop();
  sqlite3_close(db);
  return all_ok ? 0 : 1;
}
