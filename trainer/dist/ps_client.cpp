// The worker's side of the parameter servers (see ps_client.h). Each server
// has a DEALER and, on an inproc PAIR, the monitor of that DEALER's
// disconnections; gather() polls all of them together.
#include "trainer/dist/ps_client.h"

#include <zmq.h>

#include <cstring>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/log.h"

namespace swept::trainer {

struct PsClient::Link {
  std::string endpoint;
  zmq::socket_t socket;
  zmq::socket_t monitor;
};

namespace {
zmq::context_t& context() {
  static zmq::context_t* c = new zmq::context_t(1);  // lives until exit: the sockets close at any point
  return *c;
}
}  // namespace

Result<std::unique_ptr<PsClient>> PsClient::connect(const Cluster& cluster, size_t total_params,
                                                    std::chrono::milliseconds timeout,
                                                    const std::atomic<bool>* stop) {
  std::unique_ptr<PsClient> c(new PsClient());
  c->worker_ = cluster.index;
  c->workers_ = static_cast<int>(cluster.workers.size());
  c->timeout_ = timeout;
  c->stop_ = stop;
  const int servers = static_cast<int>(cluster.servers.size());
  static int next_monitor = 0;
  for (int i = 0; i < servers; ++i) {
    const Endpoint& e = cluster.servers[static_cast<size_t>(i)];
    auto link = std::make_unique<Link>();
    const bool v6 = e.host.find(':') != std::string::npos;
    link->endpoint = "tcp://";
    if (v6) link->endpoint += '[';
    link->endpoint += e.host;
    if (v6) link->endpoint += ']';
    link->endpoint += ':';
    link->endpoint += std::to_string(e.port);
    try {
      link->socket = zmq::socket_t(context(), zmq::socket_type::dealer);
      link->socket.set(zmq::sockopt::linger, 1000);
      std::string id = std::to_string(cluster.index);
      id.insert(id.begin(), 'w');
      link->socket.set(zmq::sockopt::routing_id, id);
      if (v6) link->socket.set(zmq::sockopt::ipv6, 1);
      const std::string monitor = "inproc://ps-monitor-" + std::to_string(next_monitor++);
      if (zmq_socket_monitor(link->socket.handle(), monitor.c_str(), ZMQ_EVENT_DISCONNECTED) != 0)
        throw zmq::error_t();
      link->monitor = zmq::socket_t(context(), zmq::socket_type::pair);
      link->monitor.set(zmq::sockopt::linger, 0);
      link->monitor.connect(monitor);
      link->socket.connect(link->endpoint);
    } catch (const zmq::error_t& err) {
      return Status::InvalidArgument("TF_CONFIG's cluster.ps[" + std::to_string(i) + "] gives the endpoint " +
                                     link->endpoint + ", which ZeroMQ refuses: " + err.what());
    }
    c->links_.push_back(std::move(link));
    c->slices_.push_back(ps_slice(total_params, servers, i));
  }
  c->versions_.assign(static_cast<size_t>(servers), 0);
  for (size_t i = 0; i < c->links_.size(); ++i) {
    PsRequest hello;
    hello.verb = PsVerb::kHello;
    hello.worker = c->worker_;
    hello.workers = c->workers_;
    hello.shard_floats = static_cast<int64_t>(c->slices_[i].second - c->slices_[i].first);
    SWEPT_RETURN_IF_ERROR(c->send(i, hello, nullptr, 0));
  }
  Result<PullResult> r = c->gather("the hello", nullptr);
  if (!r.ok()) return r.status();
  return c;
}

PsClient::~PsClient() = default;

Status PsClient::send(size_t server, const PsRequest& req, const void* payload, size_t bytes) {
  try {
    zmq::socket_t& s = links_[server]->socket;
    s.send(zmq::buffer(&req, sizeof req), payload != nullptr ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload != nullptr) s.send(zmq::buffer(payload, bytes), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    return Status::IoError("worker " + std::to_string(worker_) + ": sending to the parameter server at " +
                           links_[server]->endpoint + " failed: " + e.what());
  }
  return Status::Ok();
}

// One reply from every server (to the request just sent to each), or the
// first failure: a server gone (its monitor fires), an abort, the timeout.
Result<PullResult> PsClient::gather(const char* what, std::vector<float>* params) {
  const size_t n = links_.size();
  std::vector<bool> answered(n, false);
  size_t left = n;
  PullResult out;
  out.min_version = std::numeric_limits<int64_t>::max();
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  try {
    while (left > 0) {
      std::vector<zmq::pollitem_t> items;
      for (const auto& l : links_) {
        items.push_back({l->socket.handle(), 0, ZMQ_POLLIN, 0});
        items.push_back({l->monitor.handle(), 0, ZMQ_POLLIN, 0});
      }
      if (stop_ != nullptr && stop_->load()) {
        out.stopped = true;
        return out;
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (wait.count() <= 0) break;
      if (zmq::poll(items, std::min(wait, std::chrono::milliseconds(100))) <= 0) continue;
      for (size_t i = 0; i < n; ++i) {
        // A closed connection is reported only when no message is left
        // before it: a server that ends the attempt sends its reason (kAbort)
        // first, and that reason is the one to report.
        std::vector<zmq::message_t> msg;
        const bool closed = (items[2 * i + 1].revents & ZMQ_POLLIN) != 0;
        if ((items[2 * i].revents & ZMQ_POLLIN) == 0 && !closed) continue;
        if (!zmq::recv_multipart(links_[i]->socket, std::back_inserter(msg), zmq::recv_flags::dontwait)) {
          if (!closed) continue;
          return Status::IoError("worker " + std::to_string(worker_) + ": parameter server " + std::to_string(i) +
                                 " at " + links_[i]->endpoint +
                                 " ended or is unreachable (its connection closed); the attempt ends");
        }
        if (msg.empty() || msg[0].size() != sizeof(PsReply))
          return Status::IoError("parameter server " + std::to_string(i) + " sent a malformed reply");
        PsReply r;
        std::memcpy(&r, msg[0].data(), sizeof r);
        if (r.kind == PsReplyKind::kAbort) {
          const std::string why = msg.size() > 1 ? msg[1].to_string() : std::string("no reason given");
          // A refused hello is a configuration error; an abort mid-run is the attempt's end.
          if (std::strcmp(what, "the hello") == 0) return Status::InvalidArgument(why);
          return Status::IoError("worker " + std::to_string(worker_) + ": " + why);
        }
        if (answered[i]) return Status::IoError("parameter server " + std::to_string(i) + " answered twice");
        answered[i] = true;
        --left;
        versions_[i] = r.version;
        out.min_version = std::min(out.min_version, r.version);
        if (i == 0) {
          out.version0 = r.version;
          out.unit = r.unit;
          out.stats = r;
        }
        if (r.kind == PsReplyKind::kParams && params != nullptr) {
          const auto [b, e] = slices_[i];
          if (msg.size() < 2 || msg[1].size() != (e - b) * sizeof(float))
            return Status::IoError("parameter server " + std::to_string(i) + " sent a slice of the wrong size");
          std::memcpy(params->data() + b, msg[1].data(), msg[1].size());
        }
        deadline = std::chrono::steady_clock::now() + timeout_;  // any answer shows the servers are alive
      }
    }
  } catch (const zmq::error_t& e) {
    return Status::IoError("worker " + std::to_string(worker_) + ": the parameter servers failed: " + e.what());
  }
  if (left == 0) return out;
  for (size_t i = 0; i < n; ++i)
    if (!answered[i])
      return Status::IoError("worker " + std::to_string(worker_) + ": parameter server " + std::to_string(i) + " at " +
                             links_[i]->endpoint + " did not answer " + what + " within " +
                             std::to_string(timeout_.count() / 1000) +
                             " s: is it running, and does TF_CONFIG's cluster.ps name its host and port as this "
                             "host reaches it? (SWEPT_RENDEZVOUS_TIMEOUT sets the wait)");
  return out;
}

Result<PullResult> PsClient::step(const float* grad, double lr, int64_t min_version, bool want_unit,
                                  int64_t total_units, std::vector<float>& params) {
  for (size_t i = 0; i < links_.size(); ++i) {
    PsRequest req;
    req.verb = PsVerb::kStep;
    req.worker = worker_;
    req.flags = (grad != nullptr ? kPushFlag : 0u) | (want_unit && i == 0 ? kWantUnitFlag : 0u);
    req.pushed_version = versions_[i];
    req.min_version = min_version;
    req.total_units = total_units;
    req.lr = lr;
    const auto [b, e] = slices_[i];
    SWEPT_RETURN_IF_ERROR(send(i, req, grad != nullptr ? grad + b : nullptr, (e - b) * sizeof(float)));
  }
  return gather("a pull", &params);
}

Result<PullResult> PsClient::done(bool wait_all, std::vector<float>* params) {
  for (size_t i = 0; i < links_.size(); ++i) {
    PsRequest req;
    req.verb = PsVerb::kDone;
    req.worker = worker_;
    req.flags = wait_all ? kWaitAllFlag : 0u;
    SWEPT_RETURN_IF_ERROR(send(i, req, nullptr, 0));
  }
  return gather("the end of the run", params);
}

Status PsClient::stop() {
  for (size_t i = 0; i < links_.size(); ++i) {
    PsRequest req;
    req.verb = PsVerb::kStop;
    req.worker = worker_;
    SWEPT_RETURN_IF_ERROR(send(i, req, nullptr, 0));
  }
  Result<PullResult> r = gather("the stop", nullptr);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace swept::trainer
