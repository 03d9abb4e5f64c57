// The dashboard's static files (HTML, CSS, JS, d3), compiled into the binary by
// web/embed_static.cpp at build time. The table is immutable and thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace swept::web {

struct StaticFile {
  std::string_view url_path;      // "/", "/app.js", "/d3.min.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every embedded file; url paths are unique.
const std::vector<StaticFile>& static_files();

}  // namespace swept::web
