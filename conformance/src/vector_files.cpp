/// \file vector_files.cpp
/// \brief Which files `qtc verify` reads: paths and folders expanded into vector files, every unreadable entry an
///        error result naming it (verify.hpp, collect_vector_files).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

/// Why `p` cannot be followed (a symlink loop, a dangling symlink), or "" when its target exists.
std::string unreachable_reason(const std::filesystem::path& p, const std::error_code& ec) {
  namespace fs = std::filesystem;
  if (ec.value() == ELOOP) return "symlink loop (" + ec.message() + ")";
  std::error_code e2;
  if (fs::is_symlink(fs::symlink_status(p, e2))) {
    std::error_code e3;
    const fs::path target = fs::read_symlink(p, e3);
    return "dangling symlink" + (e3 ? std::string() : " to " + target.string());
  }
  return ec && ec.value() != ENOENT ? ec.message() : "no such file or directory";
}

/// Collects the *.safetensors files under `dir` (following directory symlinks once each); every entry that
/// cannot be read or followed is a problem naming its path, never a silent skip.
void scan_directory(const std::filesystem::path& dir, std::vector<std::filesystem::path>& found, std::vector<FileResult>& problems,
                    std::vector<std::pair<uint64_t, uint64_t>>& visited) {
  namespace fs = std::filesystem;
  auto problem = [&](const fs::path& p, const std::string& msg) {
    problems.push_back(error_result(p.string(), msg));
  };
  // `visited` holds the directories being scanned (this one's ancestors): meeting one again is a loop.
  struct stat sb {};
  const size_t depth = visited.size();
  struct Pop {
    std::vector<std::pair<uint64_t, uint64_t>>& v;
    size_t n;
    ~Pop() { v.resize(n); }
  } pop{visited, depth};
  if (::stat(dir.c_str(), &sb) == 0) {
    const std::pair<uint64_t, uint64_t> id{static_cast<uint64_t>(sb.st_dev), static_cast<uint64_t>(sb.st_ino)};
    if (std::find(visited.begin(), visited.end(), id) != visited.end()) {
      problem(dir, "symlink loop (a directory symlink leads back to a directory being scanned)");
      return;
    }
    visited.push_back(id);
  }
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    problem(dir, "cannot list directory: " + ec.message());
    return;
  }
  std::vector<fs::path> entries;
  for (; it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (ec) problem(dir, "cannot list directory: " + ec.message());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& e : entries) {
    std::error_code sec;
    const fs::file_status st = fs::status(e, sec);
    const bool vector_name = e.extension() == ".safetensors";
    if (sec || !fs::exists(st)) {
      // A symlink loop is an error whatever its name; a dangling link only when it names a vector.
      if (sec.value() == ELOOP || vector_name) problem(e, unreachable_reason(e, sec));
      continue;
    }
    if (fs::is_directory(st)) {
      scan_directory(e, found, problems, visited);
    } else if (vector_name) {
      if (fs::is_regular_file(st))
        found.push_back(e);
      else
        problem(e, "not a regular file");
    }
  }
}

}  // namespace

std::vector<std::filesystem::path> collect_vector_files(const std::vector<std::string>& paths, std::vector<FileResult>& problems) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      problems.push_back(error_result(p, unreachable_reason(p, ec)));
      continue;
    }
    if (!fs::is_directory(st)) {
      out.emplace_back(p);
      continue;
    }
    std::vector<fs::path> found;
    std::vector<std::pair<uint64_t, uint64_t>> visited;
    const size_t before = problems.size();
    scan_directory(p, found, problems, visited);
    if (found.empty() && problems.size() == before) {
      problems.push_back(error_result(p, "directory holds no *.safetensors file"));
      continue;
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace qtc::conformance
