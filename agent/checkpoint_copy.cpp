// copy_checkpoint (checkpoint_copy.h): walk, copy with a running CRC-32,
// read every copied file back and compare, then one rename.
#include "agent/checkpoint_copy.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

namespace swept::agent {
namespace {

namespace fs = std::filesystem;

struct Digest {
  int64_t bytes = 0;
  uLong crc = crc32(0L, Z_NULL, 0);
};

// Reads `path` whole, in blocks, into its size and CRC-32; copies each block
// to `out` when given. False on a read or write error.
bool stream_file(const fs::path& path, std::ofstream* out, Digest& d) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    d.bytes += n;
    d.crc = crc32(d.crc, reinterpret_cast<const Bytef*>(block.data()), static_cast<uInt>(n));
    if (out && !out->write(block.data(), n)) return false;
  }
  return in.eof();
}

Status copy_tree(const fs::path& from, const fs::path& incoming, CopyStats& stats) {
  std::error_code ec;
  fs::create_directories(incoming, ec);
  if (ec) return Status::Unavailable("cannot create " + incoming.string() + ": " + ec.message());
  for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), from);
    const fs::path dest = incoming / rel;
    const fs::file_status st = it->symlink_status();
    if (fs::is_directory(st)) {
      fs::create_directories(dest, ec);
      if (ec) return Status::Unavailable("cannot create " + dest.string() + ": " + ec.message());
      continue;
    }
    if (!fs::is_regular_file(st))
      return Status::InvalidArgument("the checkpoint holds " + it->path().string() +
                                     ", which is not a regular file (a link or a device); save plain files only");
    Digest read, back;
    {
      std::ofstream out(dest, std::ios::binary | std::ios::trunc);
      if (!out || !stream_file(it->path(), &out, read) || !out.flush())
        return Status::Unavailable("cannot copy " + it->path().string() + " to " + dest.string());
    }
    if (!stream_file(dest, nullptr, back)) return Status::Unavailable("cannot read back " + dest.string());
    if (back.bytes != read.bytes || back.crc != read.crc)
      return Status::Corruption("the copy of " + it->path().string() + " differs from it (" +
                                std::to_string(back.bytes) + " of " + std::to_string(read.bytes) + " bytes)");
    stats.files += 1;
    stats.bytes += read.bytes;
  }
  if (ec) return Status::Unavailable("cannot read the checkpoint " + from.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<FileDigest> digest_file(const std::string& path) {
  Digest d;
  if (!stream_file(path, nullptr, d)) return Status::Unavailable("cannot read " + path);
  return FileDigest{d.bytes, static_cast<uint32_t>(d.crc)};
}

Result<int> prune_segments(const std::string& segments_dir, int keep_a, int keep_b) {
  std::error_code ec;
  int removed = 0;
  for (auto it = fs::directory_iterator(segments_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 9) continue;
    const int segment = std::stoi(name);
    if (segment == keep_a || segment == keep_b) continue;
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (rm) return Status::Unavailable("cannot remove " + it->path().string() + ": " + rm.message());
    ++removed;
  }
  if (ec) return Status::Unavailable("cannot read " + segments_dir + ": " + ec.message());
  return removed;
}

Result<CopyStats> copy_checkpoint(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::is_directory(from, ec))
    return Status::NotFound("no checkpoint directory " + from + " on this host (the donor segment ran elsewhere, "
                            "or its directory was removed)");
  if (fs::exists(to, ec)) return Status::FailedPrecondition(to + " exists already; a segment's directory is made once");
  const fs::path incoming = to + ".incoming";
  fs::remove_all(incoming, ec);  // what an interrupted copy left
  CopyStats stats;
  Status copied = copy_tree(from, incoming, stats);
  if (!copied.ok()) {
    fs::remove_all(incoming, ec);
    return copied;
  }
  fs::rename(incoming, to, ec);
  if (ec) return Status::Unavailable("cannot rename " + incoming.string() + " to " + to + ": " + ec.message());
  return stats;
}

}  // namespace swept::agent
