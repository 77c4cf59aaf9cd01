/// \file output_file.cpp
/// \brief write_output_file(): no-follow, regular-files-only output through a temporary in the same directory.
#include "qtc/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "qtc/error.hpp"

namespace qtc::io {

namespace {

std::string kind_of(mode_t m) {
  if (S_ISLNK(m)) return "is a symbolic link";
  if (S_ISDIR(m)) return "is a directory";
  if (S_ISFIFO(m)) return "is a FIFO";
  if (S_ISCHR(m)) return "is a character device";
  if (S_ISBLK(m)) return "is a block device";
  if (S_ISSOCK(m)) return "is a socket";
  return "is not a regular file";
}

/// Removes the temporary unless released (every failure path after its creation).
struct TempGuard {
  std::string path;
  int fd = -1;
  ~TempGuard() {
    if (fd >= 0) ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

std::string output_path_problem(const std::filesystem::path& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : std::string("cannot be examined: ") + std::strerror(errno);
  return S_ISREG(st.st_mode) ? "" : kind_of(st.st_mode);
}

void write_output_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  const std::string where = path.string();
  QTC_CHECK(!path.empty() && path.filename() != "." && path.filename() != "..", "output '", where, "': not a file name");
  if (const std::string why = output_path_problem(path); !why.empty())
    QTC_FAIL(where, ": refusing to write the output: the path ", why,
             " (rule 'output-regular-file': an output path must be absent or a regular file; it is never followed or replaced)");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  static std::atomic<uint64_t> counter{0};
  TempGuard tmp;
  for (int attempt = 0; attempt < 100 && tmp.fd < 0; ++attempt) {
    const std::string name = "." + path.filename().string() + ".qtc-tmp-" + std::to_string(::getpid()) + "-" +
                             std::to_string(counter.fetch_add(1));
    const std::string candidate = (dir / name).string();
    const int fd = ::open(candidate.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      tmp.fd = fd;
      tmp.path = candidate;
    } else if (errno != EEXIST) {
      QTC_FAIL(where, ": cannot create a temporary file in ", dir.string(), ": ", std::strerror(errno));
    }
  }
  QTC_CHECK(tmp.fd >= 0, where, ": cannot create a temporary file in ", dir.string(), " (100 names taken)");
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::write(tmp.fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) QTC_FAIL(where, ": write failed: ", w < 0 ? std::strerror(errno) : "no progress", " (nothing was written to the path)");
    p += w;
    n -= static_cast<size_t>(w);
  }
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) QTC_FAIL(where, ": write failed (close): ", std::strerror(errno), " (nothing was written to the path)");
  // The path may have changed since it was examined: check again right before the rename (which never follows
  // a link at the destination: it replaces the name itself).
  if (const std::string why = output_path_problem(path); !why.empty())
    QTC_FAIL(where, ": refusing to write the output: the path ", why, " (rule 'output-regular-file')");
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    QTC_FAIL(where, ": cannot rename the temporary file into place: ", std::strerror(errno));
  tmp.path.clear();
}

void write_output_file(const std::filesystem::path& path, std::string_view text) {
  write_output_file(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace qtc::io
