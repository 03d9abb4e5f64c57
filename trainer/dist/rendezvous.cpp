// The ZeroMQ rendezvous store (see rendezvous.h). The server is one ROUTER
// socket and one poll loop on its own thread; a "get" for a key not yet set
// is parked (the requester's identity kept) and answered by the "set" that
// provides it, so waiting ranks do not poll the network. The poll wakes every
// 100 ms to notice the destructor's stop flag.
#include "trainer/dist/rendezvous.h"

#include <map>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/log.h"

namespace swept::trainer {
namespace {

std::string seconds_text(std::chrono::milliseconds t) {
  const double s = static_cast<double>(t.count()) / 1000.0;
  std::string text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " s";
}

void send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    socket.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

}  // namespace

// ---- server -------------------------------------------------------------------

struct RendezvousServer::State {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
  std::map<std::string, std::string> values;
  std::multimap<std::string, std::string> parked;  // key -> identity of a waiting "get"
};

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::start(int port) {
  std::unique_ptr<RendezvousServer> server(new RendezvousServer());
  server->state_ = std::make_unique<State>();
  zmq::socket_t& socket = server->state_->socket;
  const std::string endpoint = port > 0 ? "tcp://*:" + std::to_string(port) : std::string("tcp://*:*");
  try {
    socket.set(zmq::sockopt::linger, 0);
    socket.bind(endpoint);
    const std::string bound = socket.get(zmq::sockopt::last_endpoint);
    server->port_ = std::stoi(bound.substr(bound.rfind(':') + 1));
  } catch (const zmq::error_t& e) {
    return Status::IoError("rank 0 cannot serve the rendezvous on " + endpoint + ": " + e.what() +
                           (e.num() == EADDRINUSE ? " (MASTER_PORT is taken on this host: pick another)" : ""));
  }
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void RendezvousServer::serve() {
  State& st = *state_;
  auto reply = [&](const std::string& identity, const std::vector<std::string>& frames) {
    std::vector<std::string> all = {identity, ""};
    all.insert(all.end(), frames.begin(), frames.end());
    send_frames(st.socket, all);
  };
  try {
    while (!stop_.load()) {
      zmq::pollitem_t item{st.socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
      std::vector<zmq::message_t> msg;
      if (!zmq::recv_multipart(st.socket, std::back_inserter(msg), zmq::recv_flags::dontwait)) continue;
      if (msg.size() < 3) continue;  // not ours: no identity, delimiter and verb
      const std::string identity = msg[0].to_string(), verb = msg[2].to_string();
      if (verb == "hello") {
        reply(identity, {"ok"});
      } else if (verb == "set" && msg.size() == 5) {
        const std::string key = msg[3].to_string();
        st.values[key] = msg[4].to_string();
        reply(identity, {"ok"});
        auto [lo, hi] = st.parked.equal_range(key);
        for (auto it = lo; it != hi; ++it) reply(it->second, {"value", st.values[key]});
        st.parked.erase(lo, hi);
      } else if (verb == "get" && msg.size() == 4) {
        const std::string key = msg[3].to_string();
        auto it = st.values.find(key);
        if (it != st.values.end()) {
          reply(identity, {"value", it->second});
        } else {
          st.parked.emplace(key, identity);
        }
      } else {
        log::warn("rendezvous: ignored a malformed request (" + std::to_string(msg.size()) + " frames, verb \"" +
                  verb.substr(0, 16) + "\")");
      }
    }
  } catch (const zmq::error_t& e) {
    log::error(std::string("rendezvous server stopped: ") + e.what());
  }
}

// ---- client -------------------------------------------------------------------

struct RendezvousClient::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
};

Result<std::unique_ptr<RendezvousClient>> RendezvousClient::connect(const std::string& host, int port, int rank,
                                                                    std::chrono::milliseconds timeout) {
  std::unique_ptr<RendezvousClient> c(new RendezvousClient());
  c->socket_ = std::make_unique<Socket>();
  c->rank_ = rank;
  c->timeout_ = timeout;
  // An IPv6 literal goes in brackets in a ZeroMQ endpoint.
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  c->endpoint_ = "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  try {
    c->socket_->socket.set(zmq::sockopt::linger, 0);
    if (v6) c->socket_->socket.set(zmq::sockopt::ipv6, 1);
    c->socket_->socket.connect(c->endpoint_);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("MASTER_ADDR/MASTER_PORT give the endpoint " + c->endpoint_ +
                                   ", which ZeroMQ refuses: " + e.what());
  }
  Result<std::vector<std::string>> hello = c->request({"hello"}, timeout, "");
  if (!hello.ok()) return hello.status();
  return c;
}

RendezvousClient::~RendezvousClient() = default;

Result<std::vector<std::string>> RendezvousClient::request(const std::vector<std::string>& frames,
                                                           std::chrono::milliseconds timeout,
                                                           const std::string& what) {
  zmq::socket_t& s = socket_->socket;
  std::vector<std::string> all = {""};
  all.insert(all.end(), frames.begin(), frames.end());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    send_frames(s, all);
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
      if (left.count() <= 0 || zmq::poll(&item, 1, left) <= 0) break;
      std::vector<zmq::message_t> reply;
      if (!zmq::recv_multipart(s, std::back_inserter(reply), zmq::recv_flags::dontwait)) continue;
      std::vector<std::string> out;
      for (size_t i = 1; i < reply.size(); ++i) out.push_back(reply[i].to_string());
      return out;
    }
  } catch (const zmq::error_t& e) {
    return Status::IoError("rank " + std::to_string(rank_) + ": the rendezvous at " + endpoint_ + " failed: " +
                           e.what());
  }
  if (what.empty())
    return Status::IoError("rank " + std::to_string(rank_) + " could not reach the rendezvous at " + endpoint_ +
                           " within " + seconds_text(timeout) +
                           ": is rank 0 running, and do MASTER_ADDR and MASTER_PORT name its host and port as this "
                           "host reaches it? (SWEPT_RENDEZVOUS_TIMEOUT sets the wait)");
  return Status::IoError("rank " + std::to_string(rank_) + " waited " + seconds_text(timeout) + " at the rendezvous " +
                         endpoint_ + " for " + what +
                         ": a rank of this run never arrived (not started, or failed: see its log; WORLD_SIZE must "
                         "count every process)");
}

Status RendezvousClient::set(const std::string& key, const std::string& value) {
  Result<std::vector<std::string>> r = request({"set", key, value}, timeout_, "the store to take key \"" + key + "\"");
  if (!r.ok()) return r.status();
  if (r->empty() || (*r)[0] != "ok") return Status::IoError("the rendezvous at " + endpoint_ + " refused key " + key);
  return Status::Ok();
}

Result<std::string> RendezvousClient::get(const std::string& key) { return get(key, timeout_); }

Result<std::string> RendezvousClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  Result<std::vector<std::string>> r = request({"get", key}, timeout, "key \"" + key + "\"");
  if (!r.ok()) return r.status();
  if (r->size() != 2 || (*r)[0] != "value")
    return Status::IoError("the rendezvous at " + endpoint_ + " answered key " + key + " with something else");
  return (*r)[1];
}

// ---- Gloo's Store -------------------------------------------------------------

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Status s = client_.set(key, std::string(data.begin(), data.end()));
  if (!s.ok()) throw Failure(s);
}

std::vector<char> GlooStore::get(const std::string& key) {
  Result<std::string> v = client_.get(key);
  if (!v.ok()) throw Failure(v.status());
  return std::vector<char>(v->begin(), v->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, client_.timeout()); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo passes its context's timeout; ours (SWEPT_RENDEZVOUS_TIMEOUT) is the
  // same number, set on that context in process_group.cpp.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    Result<std::string> v = client_.get(key, std::max(left, std::chrono::milliseconds(1)));
    if (!v.ok()) throw Failure(v.status());
  }
}

}  // namespace swept::trainer
