// KeyRing and ZapHandler: see zap.h.
#include "scheduler/zap.h"

#include <zmq_addon.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/curvezmq.h"
#include "common/log.h"
#include "common/zmq_check.h"

namespace swept::scheduler {
namespace fs = std::filesystem;

namespace {
// A key's pool size from NAME.max beside NAME.pub: 1 when there is none.
Result<int> read_max_agents(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return 1;
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  int n = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (!in || text.empty() || err != std::errc() || end != text.data() + text.size() || n < 1 || n > 100000)
    return Status::InvalidArgument(file.string() + ": expected one whole number from 1 to 100000 (how many live " +
                                   "agents the key beside it may register at once), found \"" +
                                   text.substr(0, 40) + "\"; fix or remove the file");
  return n;
}
}  // namespace

Status KeyRing::reload() {
  std::map<std::string, Entry> fresh;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec))
    return Status::InvalidArgument("--authorized " + dir_ +
                                   " is not a directory: make it, with agents/ and clients/ folders of .pub files");
  const std::pair<const char*, KeyRole> places[] = {
      {"agents", KeyRole::kAgent}, {"clients", KeyRole::kClient}, {"", KeyRole::kBoth}};
  for (const auto& [sub, role] : places) {
    fs::path folder = sub[0] ? fs::path(dir_) / sub : fs::path(dir_);
    if (!fs::is_directory(folder, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(folder, ec))
      if (e.path().extension() == ".pub" && e.is_regular_file(ec)) files.push_back(e.path());
    if (ec) return Status::IoError("cannot list " + folder.string() + ": " + ec.message());
    for (const fs::path& f : files) {
      auto key = curvezmq::read_public_key_file(f.string());
      if (!key.ok()) return key.status();
      std::string label = fs::relative(f, dir_, ec).string();
      auto max_agents = read_max_agents(fs::path(f).replace_extension(".max"));
      if (!max_agents.ok()) return max_agents.status();
      auto [it, added] = fresh.emplace(*key, Entry{role, label, *max_agents});
      if (!added) it->second.max_agents = std::max(it->second.max_agents, *max_agents);
      if (!added && it->second.role != role) {
        it->second.role = KeyRole::kBoth;
        log::warn("key " + label + " is also " + it->second.label + ": it may both register and submit");
      }
      if (added && role == KeyRole::kBoth)
        log::warn("key " + label + " lies outside agents/ and clients/: it may both register as an agent and "
                  "submit commands; move it into one of them");
    }
  }
  MutexLock lock(mu_);
  keys_ = std::move(fresh);
  return Status::Ok();
}

void KeyRing::add_fixed(const std::string& z85, Entry entry) {
  MutexLock lock(mu_);
  fixed_[z85] = std::move(entry);
}

std::optional<KeyRing::Entry> KeyRing::find(const std::string& z85) const {
  MutexLock lock(mu_);
  if (auto it = fixed_.find(z85); it != fixed_.end()) return it->second;
  auto it = keys_.find(z85);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

size_t KeyRing::size() const {
  MutexLock lock(mu_);
  return keys_.size();
}

void RefusalLog::refused(int64_t now_ms, const std::string& address, std::string_view reason) {
  flush(now_ms);
  if (count_ == 0) window_start_ms_ = now_ms;
  ++count_;
  if (auto it = by_address_.find(address); it != by_address_.end())
    ++it->second;
  else if (by_address_.size() < kMaxAddresses)
    by_address_.emplace(address, 1);
  else
    addresses_overflowed_ = true;
  if (shown_ < burst_) {
    ++shown_;
    log::warn("refused a connection from " + address + ": " + std::string(reason));
  }
}

void RefusalLog::flush(int64_t now_ms) {
  if (count_ > 0 && now_ms - window_start_ms_ >= window_ms_) summarize(now_ms);
}

void RefusalLog::finish(int64_t now_ms) {
  if (count_ > 0) summarize(now_ms);
}

void RefusalLog::summarize(int64_t now_ms) {
  if (count_ > shown_) {
    // The busiest address: the one an operator would block first.
    auto most = by_address_.begin();
    for (auto it = by_address_.begin(); it != by_address_.end(); ++it)
      if (it->second > most->second) most = it;
    const size_t n = by_address_.size();
    // The window as configured once it is over; the time so far when the handler stops early.
    const int64_t span_ms = std::min(now_ms - window_start_ms_, window_ms_);
    const std::string span = span_ms == 60'000 ? "minute" : std::to_string((span_ms + 999) / 1000) + " s";
    log::warn(std::to_string(count_) + " refused handshakes from " + (addresses_overflowed_ ? "more than " : "") +
              std::to_string(n) + (n == 1 && !addresses_overflowed_ ? " address" : " addresses") + " in the last " +
              span + " (" + std::to_string(shown_) + " shown above; the most, " + std::to_string(most->second) +
              ", from " + most->first + ")");
  }
  count_ = 0;
  shown_ = 0;
  addresses_overflowed_ = false;
  by_address_.clear();
}

Status ZapHandler::start(std::atomic<bool>* reload) {
  reload_ = reload;
  zmq::socket_t socket;
  SWEPT_ZMQ_CHECK(socket = zmq::socket_t(context_, zmq::socket_type::rep));
  SWEPT_ZMQ_CHECK(socket.set(zmq::sockopt::linger, 0));
  SWEPT_ZMQ_CHECK(socket.bind("inproc://zeromq.zap.01"));
  stop_ = false;
  thread_ = std::thread([this, s = std::move(socket)]() mutable { loop(std::move(s)); });
  return Status::Ok();
}

void ZapHandler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::loop(zmq::socket_t socket) {
  // A few lines a minute whatever the flood; the summary comes from the
  // 100 ms poll below even when the flood stops (issue 26), and what is
  // still counted when the handler stops is written then, not lost.
  RefusalLog refusals(10, 60'000);
  struct Finish {
    RefusalLog& log;
    const Clock& clock;
    ~Finish() { log.finish(clock.now_ms()); }
  } finish{refusals, clock_};
  while (!stop_) {
    refusals.flush(clock_.now_ms());
    if (reload_ && reload_->exchange(false)) {
      Status s = keys_->reload();
      if (s.ok())
        log::info("re-read " + keys_->dir() + ": " + std::to_string(keys_->size()) + " keys authorized");
      else
        log::error("SIGHUP: keeping the previous keys: " + s.message());
    }
    try {
      zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> request;
      if (!zmq::recv_multipart(socket, std::back_inserter(request))) continue;
      // version, request id, domain, address, identity, mechanism, credentials...
      std::string version = request.size() > 0 ? request[0].to_string() : "1.0";
      std::string request_id = request.size() > 1 ? request[1].to_string() : "";
      std::string address = request.size() > 3 ? request[3].to_string() : "";
      std::string mechanism = request.size() > 5 ? request[5].to_string() : "";
      std::string status = "400", text = "key not authorized", user_id;
      if (version != "1.0") {
        status = "500";
        text = "unsupported ZAP version";
      } else if (mechanism == "CURVE" && request.size() > 6 && request[6].size() == 32) {
        char z85[41];
        zmq_z85_encode(z85, static_cast<const uint8_t*>(request[6].data()), 32);
        if (auto entry = keys_->find(z85)) {
          status = "200";
          text = "OK";
          user_id = z85;
          log::debug("key " + entry->label + " connected from " + address);
        }
      } else {
        text = "CURVE required";
      }
      if (status != "200") {
        refused_++;
        refusals.refused(clock_.now_ms(), address, text);
      }
      std::vector<zmq::const_buffer> reply = {zmq::buffer(version),
                                              zmq::buffer(request_id), zmq::buffer(status), zmq::buffer(text),
                                              zmq::buffer(user_id), zmq::const_buffer()};
      zmq::send_multipart(socket, reply);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) log::error(std::string("ZAP handler: ") + e.what());
    }
  }
}

}  // namespace swept::scheduler
