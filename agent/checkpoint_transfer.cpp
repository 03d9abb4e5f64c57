// serve_pull and CheckpointFetch (checkpoint_transfer.h): the two ends of a
// checkpoint moved between agents, one pull and one part at a time.
#include "agent/checkpoint_transfer.h"
#include "common/trial_dir.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

namespace swept::agent {
namespace {

namespace fs = std::filesystem;
namespace pr = protocol;

std::string describe_segment(int64_t trial_id, int attempt) {
  return "trial " + std::to_string(trial_id) + " segment " + std::to_string(attempt);
}

// Every regular file under `dir`, relative and '/'-separated, with its size
// and CRC-32, sorted by path. A link or device is refused, as copy_checkpoint
// refuses it: two segments must never share a file.
Result<std::vector<pr::CheckpointFile>> manifest_of(const fs::path& dir) {
  std::vector<pr::CheckpointFile> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::file_status st = it->symlink_status();
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st))
      return Status::InvalidArgument(it->path().string() + " is not a regular file (a link or a device)");
    SWEPT_ASSIGN_OR_RETURN(digest, digest_file(it->path().string()));
    files.push_back({fs::relative(it->path(), dir).generic_string(), digest.bytes, digest.crc});
  }
  if (ec) return Status::Unavailable("cannot read " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

// Up to kCheckpointPartBytes of `dir`/`path` from `offset`. The path was
// checked by the codec (relative, no ".."); a link anywhere on it is refused
// here, so the bytes always come from inside the segment's folder.
Result<std::string> read_part(const fs::path& dir, const std::string& path, int64_t offset) {
  fs::path at = dir;
  std::error_code ec;
  for (const fs::path& part : fs::path(path)) {
    at /= part;
    if (fs::is_symlink(fs::symlink_status(at, ec)))
      return Status::InvalidArgument(at.string() + " is a link; checkpoints hold plain files only");
  }
  if (!fs::is_regular_file(fs::symlink_status(at, ec))) return Status::NotFound("no file " + at.string());
  const auto size = static_cast<int64_t>(fs::file_size(at, ec));
  if (ec || offset > size)
    return Status::InvalidArgument("offset " + std::to_string(offset) + " is past the end of " + at.string());
  std::ifstream in(at, std::ios::binary);
  if (!in || !in.seekg(offset)) return Status::Unavailable("cannot read " + at.string());
  std::string data(static_cast<size_t>(std::min(pr::kCheckpointPartBytes, size - offset)), '\0');
  if (!in.read(data.data(), static_cast<std::streamsize>(data.size())))
    return Status::Unavailable("cannot read " + at.string() + " at offset " + std::to_string(offset));
  return data;
}

}  // namespace

std::string segment_dir(const std::string& root, int64_t sweep_id, int64_t trial_id, int attempt) {
  return (fs::path(root) / trial_relative_dir(sweep_id, trial_id) / "segments" / std::to_string(attempt)).string();
}

pr::CheckpointPart serve_pull(const std::string& root, const pr::CheckpointPull& pull) {
  pr::CheckpointPart part{pull.trial_id, pull.attempt, pull.from_trial_id, pull.from_attempt,
                          pull.path,     pull.offset,  {},  {}, {}};
  const std::string what = "the checkpoint of " + describe_segment(pull.from_trial_id, pull.from_attempt);
  const fs::path dir = segment_dir(root, pull.sweep_id, pull.from_trial_id, pull.from_attempt);
  std::error_code ec;
  if (pull.sweep_id <= 0) {
    part.error = "the pull of " + what + " names no sweep";
  } else if (!fs::is_directory(fs::symlink_status(dir, ec))) {
    part.error = what + " is not on its agent any more (no folder " + dir.string() + ")";
  } else if (pull.path.empty()) {
    auto files = manifest_of(dir);
    if (files.ok()) part.files = std::move(*files);
    else part.error = what + " cannot be sent: " + files.status().message();
  } else {
    auto data = read_part(dir, pull.path, pull.offset);
    if (data.ok()) part.data = std::move(*data);
    else part.error = what + " cannot be sent: " + data.status().message();
  }
  return part;
}

CheckpointFetch::CheckpointFetch(pr::CheckpointPull first, std::string dest)
    : pull_(std::move(first)), dest_(std::move(dest)), incoming_(dest_ + ".incoming") {
  pull_.path.clear();
  pull_.offset = 0;
}

void CheckpointFetch::abandon() {
  out_.close();
  std::error_code ec;
  fs::remove_all(incoming_, ec);
}

Status CheckpointFetch::fail(Status why) {
  abandon();
  return why;
}

Result<bool> CheckpointFetch::take(const pr::CheckpointPart& part) {
  if (done_ || part.trial_id != pull_.trial_id || part.attempt != pull_.attempt ||
      part.from_trial_id != pull_.from_trial_id || part.from_attempt != pull_.from_attempt ||
      part.path != pull_.path || part.offset != pull_.offset)
    return false;  // not the answer to the pull outstanding: a duplicate, or another fetch's
  const std::string what = "the checkpoint of " + describe_segment(pull_.from_trial_id, pull_.from_attempt);
  if (!part.error.empty()) return fail(Status::Unavailable(part.error));
  if (!have_manifest_) {
    files_ = part.files;
    have_manifest_ = true;
    std::error_code ec;
    fs::remove_all(incoming_, ec);  // what an interrupted fetch of this segment left
    fs::remove_all(dest_, ec);
    fs::create_directories(incoming_, ec);
    if (ec) return fail(Status::Unavailable("cannot create " + incoming_ + ": " + ec.message()));
    SWEPT_RETURN_IF_ERROR(start_next_file());
    return true;
  }
  const pr::CheckpointFile& f = files_[next_file_];
  const auto n = static_cast<int64_t>(part.data.size());
  if (n == 0)
    return fail(Status::Unavailable(what + ": its holder sent no bytes of " + f.path + " at offset " +
                                    std::to_string(part.offset) + " of " + std::to_string(f.size)));
  if (part.offset + n > f.size)
    return fail(Status::InvalidArgument(what + ": " + f.path + " came longer than its manifest's " +
                                        std::to_string(f.size) + " bytes (it changed while it was sent?)"));
  if (!out_.write(part.data.data(), static_cast<std::streamsize>(n)))
    return fail(Status::Unavailable("cannot write " + incoming_ + "/" + f.path + " (disk full?)"));
  crc_ = static_cast<uint32_t>(crc32(crc_, reinterpret_cast<const Bytef*>(part.data.data()), static_cast<uInt>(n)));
  pull_.offset += n;
  if (pull_.offset == f.size) {
    SWEPT_RETURN_IF_ERROR(finish_file());
    ++next_file_;
    SWEPT_RETURN_IF_ERROR(start_next_file());
  }
  return true;
}

Status CheckpointFetch::start_next_file() {
  for (; next_file_ < files_.size(); ++next_file_) {
    const pr::CheckpointFile& f = files_[next_file_];
    const fs::path path = fs::path(incoming_) / f.path;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (ec || !out_) return fail(Status::Unavailable("cannot create " + path.string()));
    crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
    pull_.path = f.path;
    pull_.offset = 0;
    if (f.size > 0) return Status::Ok();
    SWEPT_RETURN_IF_ERROR(finish_file());  // an empty file: nothing to pull
  }
  std::error_code ec;
  fs::rename(incoming_, dest_, ec);
  if (ec) return fail(Status::Unavailable("cannot rename " + incoming_ + " to " + dest_ + ": " + ec.message()));
  done_ = true;
  return Status::Ok();
}

Status CheckpointFetch::finish_file() {
  const pr::CheckpointFile& f = files_[next_file_];
  const std::string path = incoming_ + "/" + f.path;
  out_.close();
  if (out_.fail()) return fail(Status::Unavailable("cannot write " + path + " (disk full?)"));
  if (crc_ != f.crc)
    return fail(Status::Corruption("the bytes received of " + f.path + " do not match its CRC-32 in the manifest"));
  auto back = digest_file(path);  // what the disk holds, not what was written to it
  if (!back.ok()) return fail(back.status());
  if (back->bytes != f.size || back->crc != f.crc)
    return fail(Status::Corruption(path + " read back differs from what was sent (" + std::to_string(back->bytes) +
                                   " of " + std::to_string(f.size) + " bytes)"));
  stats_.files += 1;
  stats_.bytes += f.size;
  return Status::Ok();
}

}  // namespace swept::agent
