/// \file report_text.cpp
/// \brief Text for the report's pages: HTML and Markdown escaping, numbers to a fixed count of significant digits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "report_internal.hpp"

namespace qtc::report {
namespace detail {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        o += (u < 0x20 && c != '\n' && c != '\t') || u == 0x7F ? ' ' : c;  // no raw control characters in the page
      }
    }
  }
  return o;
}

std::string md_escape(const std::string& s) {
  std::string o;
  // Markdown renderers pass HTML through: '<' and '&' from an input never start a tag or an entity there.
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '|') o += "\\|";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (u < 0x20 || u == 0x7F) o += ' ';
    else o += c;
  }
  return o;
}

std::string fmt_num(double v, int sig) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  return fmt::format("{:.{}g}", v, sig);
}

}  // namespace detail
}  // namespace qtc::report
