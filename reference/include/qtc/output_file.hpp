/// \file output_file.hpp
/// \brief Writing a file that a user named (`qtc quantize -o`, `qtc convert -o`, `save_vector`, the reports):
///        the path must be absent or a regular file (a device node, FIFO, socket, directory or symbolic link
///        is refused, never replaced or followed); the bytes go to a new temporary file in the same directory
///        (created with O_EXCL | O_NOFOLLOW), which is renamed over the path only once everything is written.
///        A write that fails (ENOSPC, EFBIG, EIO) removes its temporary: nothing is left behind, and the file
///        that was at the path is unchanged.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace qtc::io {

/// Why `path` may not be written by write_output_file(): "" when it is absent or a regular file, else the
/// reason ("is a symbolic link", "is a FIFO", "is a character device", "is a directory", ...).
std::string output_path_problem(const std::filesystem::path& path);

/// Writes `bytes` to `path` as described above; throws qtc::Error naming the path and the rule broken.
void write_output_file(const std::filesystem::path& path, std::span<const uint8_t> bytes);
void write_output_file(const std::filesystem::path& path, std::string_view text);

}  // namespace qtc::io
