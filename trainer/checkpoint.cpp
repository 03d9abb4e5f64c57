// Checkpoint files (see checkpoint.h): serialisation with a checksum, atomic
// replacement with POSIX calls, and the listing used by --resume.
#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace swept::trainer {
namespace {

constexpr char kMagic[8] = {'S', 'W', 'E', 'P', 'T', 'C', 'K', '1'};
constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".swck";

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

template <typename T>
void append(std::vector<uint8_t>& out, const T* p, size_t n) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n * sizeof(T));
}

Status io_error(const std::string& what, const std::string& path) {
  return Status::IoError(what + " " + path + ": " + std::strerror(errno));
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

bool parse_step(const std::string& name, int64_t* step) {
  const size_t pre = std::strlen(kPrefix), suf = std::strlen(kSuffix);
  if (name.size() <= pre + suf || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - suf, suf, kSuffix) != 0)
    return false;
  const std::string digits = name.substr(pre, name.size() - pre - suf);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18)
    return false;
  *step = std::stoll(digits);
  return true;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return dir + "/" + name;
}

Status write_checkpoint(const std::string& dir, const CheckpointState& s, int keep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create checkpoint folder " + dir + ": " + ec.message());

  nlohmann::json meta = {
      {"model", s.model}, {"optimizer", s.optimizer}, {"batch_size", s.batch_size},
      {"train_count", s.train_count}, {"seed", s.seed}, {"step", s.step}, {"epoch", s.epoch},
      {"window_loss_sum", s.window_loss_sum}, {"window_correct", s.window_correct},
      {"window_samples", s.window_samples}, {"window_steps", s.window_steps},
      {"train_seconds", s.train_seconds}, {"param_count", s.params.size()},
      {"state_count", s.state2.empty() ? (s.state1.empty() ? 0 : 1) : 2}, {"order_count", s.order.size()}};
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [name, shape] : s.tensors) tensors.push_back({{"name", name}, {"shape", shape}});
  meta["tensors"] = tensors;
  meta["epoch_position"] = s.epoch_position;
  nlohmann::json hyper = nlohmann::json::object();
  for (const auto& [name, value] : s.hyperparameters) hyper[name] = nlohmann::json::parse(value);
  meta["hyperparameters"] = hyper;
  const std::string meta_text = meta.dump();

  std::vector<uint8_t> bytes;
  bytes.reserve(64 + meta_text.size() + 4 * (3 * s.params.size() + s.order.size()));
  append(bytes, kMagic, 8);
  const uint32_t version = kCheckpointVersion, meta_len = static_cast<uint32_t>(meta_text.size());
  append(bytes, &version, 1);
  append(bytes, &meta_len, 1);
  append(bytes, meta_text.data(), meta_text.size());
  append(bytes, s.params.data(), s.params.size());
  append(bytes, s.state1.data(), s.state1.size());
  append(bytes, s.state2.data(), s.state2.size());
  append(bytes, s.order.data(), s.order.size());
  const uint64_t sum = fnv1a(bytes.data(), bytes.size());
  append(bytes, &sum, 1);

  const std::string final_path = checkpoint_path(dir, s.step);
  const std::string tmp_path =
      dir + "/.tmp-" + final_path.substr(dir.size() + 1) + "." + std::to_string(::getpid());
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", tmp_path);
  Status st = write_all(fd, bytes.data(), bytes.size(), tmp_path);
  if (st.ok() && ::fsync(fd) != 0) st = io_error("cannot fsync", tmp_path);
  if (::close(fd) != 0 && st.ok()) st = io_error("cannot close", tmp_path);
  if (st.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) st = io_error("cannot rename to", final_path);
  if (!st.ok()) {
    ::unlink(tmp_path.c_str());
    return st;
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  // Prune: the newest `keep` stay (older ones are the fallback if the newest
  // is ever found corrupt), plus temporaries of earlier, killed runs.
  const std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) ::unlink(all[i].c_str());
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-ckpt-", 0) == 0 && entry.path().string() != tmp_path) ::unlink(entry.path().c_str());
  }
  return Status::Ok();
}

Result<CheckpointState> read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot open checkpoint " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](const std::string& what) { return Status::Corruption("checkpoint " + path + ": " + what); };
  if (bytes.size() < 8 + 4 + 4 + 8) return corrupt("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) return corrupt("not a swept-train checkpoint (bad magic)");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a(bytes.data(), bytes.size() - 8) != stored_sum)
    return corrupt("checksum mismatch (truncated or damaged)");
  uint32_t version, meta_len;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&meta_len, bytes.data() + 12, 4);
  if (version != kCheckpointVersion)
    return corrupt("format version " + std::to_string(version) + ", this swept-train reads version " +
                   std::to_string(kCheckpointVersion));
  if (16 + static_cast<uint64_t>(meta_len) + 8 > bytes.size()) return corrupt("metadata runs past the end");
  CheckpointState s;
  uint64_t param_count, state_count, order_count;
  try {
    const nlohmann::json meta =
        nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<std::ptrdiff_t>(meta_len));
    s.model = meta.at("model").get<std::string>();
    s.optimizer = meta.at("optimizer").get<std::string>();
    s.batch_size = meta.at("batch_size").get<int>();
    s.train_count = meta.at("train_count").get<uint64_t>();
    s.seed = meta.at("seed").get<uint64_t>();
    s.step = meta.at("step").get<int64_t>();
    s.epoch = meta.at("epoch").get<int64_t>();
    s.window_loss_sum = meta.at("window_loss_sum").get<double>();
    s.window_correct = meta.at("window_correct").get<double>();
    s.window_samples = meta.at("window_samples").get<int64_t>();
    s.window_steps = meta.at("window_steps").get<int64_t>();
    s.train_seconds = meta.at("train_seconds").get<double>();
    param_count = meta.at("param_count").get<uint64_t>();
    state_count = meta.at("state_count").get<uint64_t>();
    order_count = meta.at("order_count").get<uint64_t>();
    for (const auto& t : meta.at("tensors"))
      s.tensors.emplace_back(t.at("name").get<std::string>(), t.at("shape").get<std::vector<int>>());
    s.epoch_position = meta.value("epoch_position", int64_t{-1});
    if (meta.contains("hyperparameters"))
      for (const auto& [name, value] : meta.at("hyperparameters").items()) s.hyperparameters.emplace_back(name, value.dump());
  } catch (const std::exception& e) {
    return corrupt(std::string("bad metadata: ") + e.what());
  }
  if (state_count > 2) return corrupt("bad state count");
  const uint64_t body = 16 + static_cast<uint64_t>(meta_len);
  const uint64_t expected = body + 4 * ((1 + state_count) * param_count + order_count) + 8;
  if (param_count > (uint64_t{1} << 34) || order_count > (uint64_t{1} << 34) || expected != bytes.size())
    return corrupt("sizes in the metadata do not match the file size");
  const uint8_t* p = bytes.data() + body;
  auto take = [&](auto& vec, uint64_t n) {
    vec.resize(n);
    std::memcpy(vec.data(), p, n * 4);
    p += n * 4;
  };
  take(s.params, param_count);
  if (state_count >= 1) take(s.state1, param_count);
  if (state_count >= 2) take(s.state2, param_count);
  take(s.order, order_count);
  return s;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    int64_t step = 0;
    if (entry.is_regular_file(ec) && parse_step(entry.path().filename().string(), &step))
      found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string describe_hyperparameter_changes(const std::vector<std::pair<std::string, std::string>>& before,
                                            const std::vector<std::pair<std::string, std::string>>& after) {
  std::string out;
  for (const auto& [name, value] : after) {
    const auto old = std::find_if(before.begin(), before.end(), [&](const auto& b) { return b.first == name; });
    if (old != before.end() && old->second == value) continue;
    if (!out.empty()) out += ", ";
    out += name + " " + (old == before.end() ? std::string("?") : old->second) + " -> " + value;
  }
  return out;
}

}  // namespace swept::trainer
