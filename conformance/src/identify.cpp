/// \file identify.cpp
/// \brief identify_vector: one CPU verification per candidate profile (and MXFP8 scale rule).
#include "qtc/identify.hpp"

#include <cstdint>

#include "qtc/error.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

struct Candidate {
  std::string profile;
  std::string scale_rule;  ///< MXFP8 only; empty otherwise
  std::string label() const { return scale_rule.empty() ? profile : profile + "+" + scale_rule; }
};

std::vector<Candidate> candidates_for(bool mx) {
  std::vector<Candidate> out;
  for (const char* p : {"te", "te_pyref", "ocp", "torchao"}) {
    if (!mx) {
      out.push_back({p, {}});
      continue;
    }
    for (const char* rule : {"rceil", "ocp_floor"}) out.push_back({p, rule});
  }
  return out;
}

std::string first_mismatch(const FileResult& r) { return r.details.empty() ? r.message : r.details.front(); }

}  // namespace

const char* identity_tag(IdentityVerdict v) {
  switch (v) {
    case IdentityVerdict::kClaimed: return "OK";
    case IdentityVerdict::kOther: return "OTHER";
    case IdentityVerdict::kNone: return "NONE";
    case IdentityVerdict::kError: return "ERROR";
  }
  return "ERROR";
}

std::string join_labels(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

VectorIdentity identify_vector(const std::filesystem::path& path, QuantizeBackend& cpu) {
  io::File f;
  try {
    f = io::read_file(path);
  } catch (const Error& e) {
    VectorIdentity id;
    id.path = path.string();
    id.error = e.what();
    return id;
  }
  return identify_vector(f, path.string(), cpu);
}

VectorIdentity identify_vector(const io::File& f, const std::string& source, QuantizeBackend& cpu) {
  VectorIdentity id;
  id.path = source;
  const auto get = [&](const char* k, const char* d) {
    const auto it = f.metadata.find(k);
    return it == f.metadata.end() ? std::string(d) : it->second;
  };
  id.source = get("source", "");
  id.recipe = get("recipe", "");
  const bool mx = id.recipe == "mxfp8";
  id.claimed = get("profile", "te") + (mx ? "+" + get("scale_rule", "rceil") : "");
  size_t best = SIZE_MAX;
  int applicable = 0;
  std::string first_error;
  for (const Candidate& c : candidates_for(mx)) {
    io::File g = f;
    g.metadata["profile"] = c.profile;
    if (!c.scale_rule.empty()) g.metadata["scale_rule"] = c.scale_rule;
    const FileResult r = verify_vector(g, id.path + " as " + c.label(), cpu);
    if (r.verdict == Verdict::kError) {  // the recipe is not defined under this profile
      if (first_error.empty()) first_error = r.message;
      continue;
    }
    ++applicable;
    if (r.verdict == Verdict::kPass) {
      id.matches.push_back(c.label());
      continue;
    }
    if (c.label() == id.claimed) id.claimed_mismatch = first_mismatch(r);
    if (r.details.size() < best) {
      best = r.details.size();
      id.closest = c.label();
      id.closest_mismatch = first_mismatch(r);
    }
  }
  if (applicable == 0) {
    id.error = first_error.empty() ? "no profile applies to this file" : first_error;
    id.verdict = IdentityVerdict::kError;
    return id;
  }
  bool claimed = false;
  for (const auto& m : id.matches) claimed = claimed || m == id.claimed;
  id.verdict = claimed ? IdentityVerdict::kClaimed : (id.matches.empty() ? IdentityVerdict::kNone : IdentityVerdict::kOther);
  if (id.verdict != IdentityVerdict::kNone) id.closest.clear(), id.closest_mismatch.clear();
  return id;
}

}  // namespace qtc::conformance
