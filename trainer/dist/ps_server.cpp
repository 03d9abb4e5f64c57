// The parameter server (see ps_server.h): one ROUTER socket, one poll loop
// that reads top to bottom (a message in, its effect, then every held-back
// reply that may now go out), the optimiser on a one-replica CPU backend.
// The loop wakes every 100 ms to notice a stop request.
//
// A lost worker is seen through the ROUTER's socket monitor (libzmq 4.3's
// per-peer disconnect notice is a draft API that Debian's build leaves
// out): the monitor counts closed connections but does not say whose. A
// finished worker also closes its connection, and its kDone may still be
// queued behind the monitor's event, so a count of closed connections above
// the finished workers must last kLostGrace before it ends the attempt.
#include "trainer/dist/ps_server.h"

#include <zmq.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/backend.h"
#include "trainer/dist/ps_protocol.h"
#include "trainer/model.h"

namespace swept::trainer {
namespace {

// One tensor's part of this server's slice: where it starts in the slice,
// how many floats, and its weight decay (weights decay, biases do not).
struct Piece {
  size_t at = 0;
  size_t size = 0;
  float decay = 0;
};

constexpr auto kLostGrace = std::chrono::seconds(1);

struct Parked {
  std::string identity;
  PsRequest request;
};

class Server {
 public:
  Server(const TrainConfig& config, const Cluster& cluster)
      : config_(config),
        index_(cluster.index),
        workers_(static_cast<int>(cluster.workers.size())),
        servers_(static_cast<int>(cluster.servers.size())),
        port_(cluster.servers[static_cast<size_t>(cluster.index)].port),
        clocks_(static_cast<size_t>(workers_), 0),
        done_(static_cast<size_t>(workers_), false),
        arrived_(static_cast<size_t>(workers_), false),
        ids_(static_cast<size_t>(workers_)) {}

  Status init();
  int run(const std::atomic<bool>& stop);

 private:
  bool handle(const std::string& id, const PsRequest& req, const zmq::message_t* payload, int* exit_code);
  Status push(int worker, const PsRequest& req, const float* grad);
  Status apply(const float* grad, double lr);
  bool ready(const Parked& p) const;
  void answer_parked();
  void answer(const Parked& p);
  void send(const std::string& id, const PsReply& r, const void* data, size_t bytes);
  void abort_all(const std::string& why);
  int64_t slowest_unfinished_clock() const;
  bool lost_worker();
  PsReply stats() const;

  TrainConfig config_;
  int index_, workers_, servers_, port_;
  size_t begin_ = 0, end_ = 0;
  std::vector<Piece> pieces_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Buffer> params_, grad_, state1_, state2_, scalars_;
  std::vector<std::vector<float>> slots_;  // sync: each worker's gradient of the current version
  std::vector<float> mean_;
  int64_t version_ = 0;
  std::vector<int64_t> clocks_;  // pushes received, per worker
  std::vector<bool> done_, arrived_;
  int arrived_count_ = 0;
  int64_t next_unit_ = 0;
  double staleness_sum_ = 0;
  int64_t staleness_count_ = 0, staleness_max_ = 0, dropped_ = 0;
  std::vector<std::string> ids_;  // routing id of each worker, once it said hello
  std::map<std::string, int> worker_of_;
  std::vector<Parked> parked_;
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  zmq::socket_t monitor_{context_, zmq::socket_type::pair};
  int64_t closed_ = 0;  // connections closed (the monitor's count)
  std::optional<std::chrono::steady_clock::time_point> lost_since_;
};

Status Server::init() {
  const ParamLayout layout = param_layout(config_.model);
  std::tie(begin_, end_) = ps_slice(layout.total, servers_, index_);
  for (const ParamTensor& t : layout.tensors) {
    const size_t b = std::max(begin_, t.offset), e = std::min(end_, t.offset + t.size);
    if (b >= e) continue;
    pieces_.push_back({b - begin_, e - b, t.is_weight ? static_cast<float>(config_.weight_decay) : 0.0f});
  }
  CpuBackendOptions options;
  options.threads = config_.threads > 0 ? config_.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend_ = make_cpu_backend(options);
  const size_t n = std::max<size_t>(1, end_ - begin_);
  const std::vector<float> init = initial_params(config_.model, config_.seed);
  auto alloc = [&](std::unique_ptr<Buffer>& out, size_t bytes) -> Status {
    Result<std::unique_ptr<Buffer>> b = backend_->allocate(bytes);
    if (!b.ok()) return b.status();
    out = std::move(*b);
    return backend_->fill(out->f32(), bytes / sizeof(float), 0.0f);
  };
  SWEPT_RETURN_IF_ERROR(alloc(params_, n * sizeof(float)));
  SWEPT_RETURN_IF_ERROR(alloc(grad_, n * sizeof(float)));
  SWEPT_RETURN_IF_ERROR(alloc(scalars_, sizeof(StepScalars)));
  if (config_.optimizer.kind != OptimizerKind::kSgd) SWEPT_RETURN_IF_ERROR(alloc(state1_, n * sizeof(float)));
  if (config_.optimizer.kind == OptimizerKind::kAdam) SWEPT_RETURN_IF_ERROR(alloc(state2_, n * sizeof(float)));
  SWEPT_RETURN_IF_ERROR(
      backend_->copy_from_host(params_->data(), init.data() + begin_, (end_ - begin_) * sizeof(float)));
  if (config_.ps_mode == PsMode::kSync) {
    slots_.assign(static_cast<size_t>(workers_), std::vector<float>(end_ - begin_));
    mean_.resize(end_ - begin_);
  }
  return backend_->synchronize();
}

// One optimiser step of the slice with `grad` (the slice's floats): the
// trainer's own update (train.cpp), piece by piece.
Status Server::apply(const float* grad, double lr) {
  SWEPT_RETURN_IF_ERROR(backend_->copy_from_host(grad_->data(), grad, (end_ - begin_) * sizeof(float)));
  StepScalars s;
  s.lr = static_cast<float>(lr);
  const double t = static_cast<double>(version_ + 1);
  s.adam_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.optimizer.beta1), t));
  s.adam_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.optimizer.beta2), t));
  s.step = static_cast<uint64_t>(version_);
  s.seed = config_.seed;
  SWEPT_RETURN_IF_ERROR(backend_->copy_from_host(scalars_->data(), &s, sizeof s));
  const auto* scalars = static_cast<const StepScalars*>(scalars_->data());
  for (const Piece& p : pieces_) {
    SWEPT_RETURN_IF_ERROR(backend_->optimizer_update(config_.optimizer, p.decay, p.size, params_->f32() + p.at,
                                                     grad_->f32() + p.at, state1_ ? state1_->f32() + p.at : nullptr,
                                                     state2_ ? state2_->f32() + p.at : nullptr, scalars));
  }
  SWEPT_RETURN_IF_ERROR(backend_->synchronize());
  ++version_;
  return Status::Ok();
}

Status Server::push(int worker, const PsRequest& req, const float* grad) {
  const auto w = static_cast<size_t>(worker);
  ++clocks_[w];
  if (config_.ps_mode == PsMode::kAsync) {
    const int64_t stale = version_ - req.pushed_version;
    staleness_sum_ += static_cast<double>(stale);
    ++staleness_count_;
    staleness_max_ = std::max(staleness_max_, stale);
    return apply(grad, req.lr);
  }
  // sync: only gradients of the current version, the first N - K of them.
  if (req.pushed_version != version_ || arrived_[w]) {
    ++dropped_;
    return Status::Ok();
  }
  std::memcpy(slots_[w].data(), grad, slots_[w].size() * sizeof(float));
  arrived_[w] = true;
  if (++arrived_count_ < workers_ - config_.backup_workers) return Status::Ok();
  // Summed in worker order, then scaled as the all-reduce scales its sum.
  std::fill(mean_.begin(), mean_.end(), 0.0f);
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (!arrived_[k]) continue;
    const float* g = slots_[k].data();
    for (size_t i = 0; i < mean_.size(); ++i) mean_[i] += g[i];
  }
  const float inv = 1.0f / static_cast<float>(arrived_count_);
  for (float& v : mean_) v *= inv;
  staleness_count_ += arrived_count_;  // each 0 versions behind
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrived_count_ = 0;
  return apply(mean_.data(), req.lr);
}

int64_t Server::slowest_unfinished_clock() const {
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (!done_[w]) slowest = std::min(slowest, clocks_[w]);
  return slowest;
}

// More connections closed than workers finished, for kLostGrace.
bool Server::lost_worker() {
  const auto finished = static_cast<int64_t>(std::count(done_.begin(), done_.end(), true));
  if (closed_ <= finished) {
    lost_since_.reset();
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!lost_since_) lost_since_ = now;
  return now - *lost_since_ >= kLostGrace;
}

bool Server::ready(const Parked& p) const {
  if (p.request.verb == PsVerb::kDone) return std::all_of(done_.begin(), done_.end(), [](bool d) { return d; });
  if (version_ < p.request.min_version) return false;
  if (config_.ps_mode == PsMode::kAsync && config_.max_staleness > 0) {
    const int64_t mine = clocks_[static_cast<size_t>(p.request.worker)];
    const int64_t slowest = slowest_unfinished_clock();
    if (slowest != std::numeric_limits<int64_t>::max() && mine - slowest > config_.max_staleness) return false;
  }
  return true;
}

PsReply Server::stats() const {
  PsReply r;
  r.version = version_;
  r.staleness_sum = staleness_sum_;
  r.staleness_count = staleness_count_;
  r.staleness_max = staleness_max_;
  r.dropped = dropped_;
  return r;
}

void Server::send(const std::string& id, const PsReply& r, const void* data, size_t bytes) {
  socket_.send(zmq::buffer(id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(&r, sizeof r), data != nullptr ? zmq::send_flags::sndmore : zmq::send_flags::none);
  if (data != nullptr) socket_.send(zmq::buffer(data, bytes), zmq::send_flags::none);
}

void Server::answer(const Parked& p) {
  PsReply r = stats();
  r.kind = PsReplyKind::kParams;
  if ((p.request.flags & kWantUnitFlag) != 0) r.unit = next_unit_ < p.request.total_units ? next_unit_++ : -1;
  send(p.identity, r, params_->data(), (end_ - begin_) * sizeof(float));
}

void Server::answer_parked() {
  std::vector<Parked> waiting;
  for (Parked& p : parked_) {
    if (ready(p)) answer(p);
    else waiting.push_back(std::move(p));
  }
  parked_ = std::move(waiting);
}

void Server::abort_all(const std::string& why) {
  PsReply r = stats();
  r.kind = PsReplyKind::kAbort;
  for (const std::string& id : ids_)
    if (!id.empty()) send(id, r, why.data(), why.size());
}

// One request; false when the server is to end (*exit_code set).
bool Server::handle(const std::string& id, const PsRequest& req, const zmq::message_t* payload, int* exit_code) {
  const std::string me = "parameter server " + std::to_string(index_);
  auto refuse = [&](const std::string& why) {
    PsReply r = stats();
    r.kind = PsReplyKind::kAbort;
    send(id, r, why.data(), why.size());
    return true;
  };
  if (req.wire != kPsWireVersion) return refuse(me + " speaks wire version " + std::to_string(kPsWireVersion));
  if (req.verb == PsVerb::kHello) {
    if (req.worker < 0 || req.worker >= workers_ || req.workers != workers_)
      return refuse(me + " serves " + std::to_string(workers_) + " workers, but worker " +
                    std::to_string(req.worker) + " counts " + std::to_string(req.workers) +
                    ": give every process the same TF_CONFIG");
    if (req.shard_floats != static_cast<int64_t>(end_ - begin_))
      return refuse(me + " holds " + std::to_string(end_ - begin_) + " parameters, worker " +
                    std::to_string(req.worker) + " expects " + std::to_string(req.shard_floats) +
                    ": give every process the same --model and --hidden");
    ids_[static_cast<size_t>(req.worker)] = id;
    worker_of_[id] = req.worker;
    send(id, stats(), nullptr, 0);
    return true;
  }
  auto known = worker_of_.find(id);
  if (known == worker_of_.end() || known->second != req.worker) return refuse(me + ": hello first");
  if (req.verb == PsVerb::kStop) {
    send(id, stats(), nullptr, 0);
    *exit_code = kExitOk;
    return false;
  }
  if (req.verb == PsVerb::kDone) {
    done_[static_cast<size_t>(req.worker)] = true;
    if ((req.flags & kWaitAllFlag) != 0) parked_.push_back({id, req});
    else send(id, stats(), nullptr, 0);
    return true;
  }
  if ((req.flags & kPushFlag) != 0) {
    if (payload == nullptr || payload->size() != (end_ - begin_) * sizeof(float))
      return refuse(me + ": a gradient of the wrong size");
    Status s = push(req.worker, req, static_cast<const float*>(payload->data()));
    if (!s.ok()) {
      log::error(me + ": " + s.message());
      abort_all(me + " failed: " + s.message());
      *exit_code = kExitFailure;
      return false;
    }
  }
  parked_.push_back({id, req});
  return true;
}

int Server::run(const std::atomic<bool>& stop) {
  const std::string me = "parameter server " + std::to_string(index_);
  try {
    socket_.set(zmq::sockopt::linger, 2000);  // the last replies and aborts still go out at exit
    const std::string monitor = "inproc://ps-server-monitor";
    if (zmq_socket_monitor(socket_.handle(), monitor.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) throw zmq::error_t();
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(monitor);
    socket_.bind("tcp://*:" + std::to_string(port_));
  } catch (const zmq::error_t& e) {
    log::error(me + " cannot bind port " + std::to_string(port_) + ": " + e.what() +
               (e.num() == EADDRINUSE ? " (taken: pick another port in TF_CONFIG's cluster.ps)" : ""));
    return kExitFailure;
  }
  log::info(me + " of " + std::to_string(servers_) + " on port " + std::to_string(port_) + ": parameters [" +
            std::to_string(begin_) + ", " + std::to_string(end_) + ") for " + std::to_string(workers_) +
            " workers, " + (config_.ps_mode == PsMode::kSync ? "sync, " + std::to_string(config_.backup_workers) +
                                                                   " backup worker(s)"
                                                             : "async, max staleness " +
                                                                   std::to_string(config_.max_staleness)));
  try {
    for (;;) {
      if (stop.load()) {
        abort_all(me + " was stopped (SIGTERM or SIGINT)");
        log::info(me + " stopped by signal");
        return kExitInterrupted;
      }
      if (lost_worker()) {
        const std::string why = "a worker was lost (its connection closed before it finished: killed or crashed?); "
                                "the attempt ends";
        log::error(me + ": " + why);
        abort_all(me + ": " + why);
        return kExitFailure;
      }
      zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq::poll(items, 2, std::chrono::milliseconds(100)) <= 0) continue;
      if ((items[1].revents & ZMQ_POLLIN) != 0) {
        std::vector<zmq::message_t> event;
        if (zmq::recv_multipart(monitor_, std::back_inserter(event), zmq::recv_flags::dontwait)) ++closed_;
      }
      if ((items[0].revents & ZMQ_POLLIN) == 0) continue;
      std::vector<zmq::message_t> msg;
      if (!zmq::recv_multipart(socket_, std::back_inserter(msg), zmq::recv_flags::dontwait)) continue;
      const std::string id = msg[0].to_string();
      if (msg.size() < 2 || msg[1].size() != sizeof(PsRequest)) {
        log::warn(me + ": ignored a malformed message (" + std::to_string(msg.size()) + " frames)");
        continue;
      }
      PsRequest req;
      std::memcpy(&req, msg[1].data(), sizeof req);
      int exit_code = kExitOk;
      if (!handle(id, req, msg.size() > 2 ? &msg[2] : nullptr, &exit_code)) {
        if (exit_code == kExitOk) log::info(me + ": worker 0 is done, stopping after " + std::to_string(version_) + " updates");
        return exit_code;
      }
      answer_parked();
    }
  } catch (const zmq::error_t& e) {
    log::error(me + " failed: " + e.what());
    return kExitFailure;
  }
}

}  // namespace

int serve_parameters(const TrainConfig& config, const Cluster& cluster, const std::atomic<bool>& stop) {
  Server server(config, cluster);
  Status s = server.init();
  if (!s.ok()) {
    log::error("parameter server " + std::to_string(cluster.index) + ": " + s.message());
    return kExitFailure;
  }
  return server.run(stop);
}

}  // namespace swept::trainer
