/// \file identify.cpp
/// \brief identify_vector: one CPU verification per candidate profile (and MXFP8 scale rule).
#include "qtc/identify.hpp"

#include <cctype>
#include <climits>
#include <algorithm>
#include <cstdint>

#include "qtc/error.hpp"
#include "qtc/profile.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

struct Candidate {
  std::string profile;
  std::string scale_rule;  ///< MXFP8 and MXFP4 only; empty otherwise
  std::string label() const { return scale_rule.empty() ? profile : profile + "+" + scale_rule; }
};

/// Every built-in profile (MXFP8, MXFP4: with every scale rule it defines for the kind), in profile.hpp's order.
std::vector<Candidate> candidates_for(const std::string& recipe) {
  std::vector<Candidate> out;
  for (const ProfileRules& p : all_profiles()) {
    const std::vector<MxScaleRule>* rules = recipe == "mxfp8" ? &p.mx_scale_rules : recipe == "mxfp4" ? &p.mxfp4_scale_rules : nullptr;
    if (rules == nullptr) {
      out.push_back({p.name, {}});
      continue;
    }
    for (MxScaleRule rule : *rules) out.push_back({p.name, std::string(mx_scale_rule_name(rule))});
  }
  return out;
}

std::string first_mismatch(const FileResult& r) { return r.details.empty() ? r.message : r.details.front(); }

/// Mismatching elements of a failed verification: the "N of M elements differ" counts of its detail lines
/// (a detail without a count, e.g. a wrong shape, counts as one).
int64_t mismatch_count(const FileResult& r) {
  int64_t n = 0;
  for (const std::string& d : r.details) {
    const size_t at = d.find(" of ");
    size_t b = at;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(d[b - 1]))) --b;
    n += (at != std::string::npos && b < at) ? std::stoll(d.substr(b, at - b)) : 1;
  }
  return n == 0 ? 1 : n;
}

/// One rule changed at a time in `c`'s profile: true (and the rule recorded) when a change reproduces `f`.
bool explain_by_rule(const io::File& f, const Candidate& c, const std::string& path, QuantizeBackend& cpu,
                     VectorIdentity& id) {
  const ProfileRules& base = profile_rules(profile_from_name(c.profile));
  for (const RuleToggle& t : rule_toggles()) {
    ProfileRules v = base;
    if (!t.apply(v)) continue;
    v.name = base.name + "~" + t.rule;
    v.follows = base.follows + " with " + t.rule + " " + t.alternative;
    register_profile_variant(v);
    io::File g = f;
    g.metadata["profile"] = v.name;
    if (!c.scale_rule.empty()) g.metadata["scale_rule"] = c.scale_rule;
    if (verify_vector(g, path + " as " + v.name, cpu).verdict == Verdict::kPass) {
      id.explaining_profile = c.label();
      id.explaining_rule = t.rule;
      id.explaining_change = t.alternative;
      return true;
    }
  }
  return false;
}

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

std::string rule_explanation(const VectorIdentity& id) {
  if (id.explaining_rule.empty()) return "no single rule of any profile explains it";
  return "rule " + id.explaining_rule + " of " + id.explaining_profile + " explains it: " + id.explaining_profile + " with " +
         id.explaining_rule + " " + id.explaining_change + " reproduces it bit for bit";
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
  const bool mx = id.recipe == "mxfp8" || id.recipe == "mxfp4";  // the scale rule is named with the profile
  id.claimed = get("profile", "te") + (mx ? "+" + get("scale_rule", id.recipe == "mxfp4" ? "ocp_floor" : "rceil") : "");
  // A claim that names no profile (or MX scale rule) qtc knows is an error with the reason, not an OTHER with an
  // empty one: there is no claimed rule set to compare with.
  {
    std::string known;
    bool found = false;
    for (const Candidate& c : candidates_for(id.recipe)) {
      found = found || c.label() == id.claimed;
      known += (known.empty() ? "" : ", ") + c.label();
    }
    if (!found) {
      id.error = "metadata claims " + std::string(mx ? "profile+scale_rule " : "profile ") + printable_name(id.claimed) +
                 ", which is not one qtc knows (rule 'known-profile'; known: " + known + ")";
      id.verdict = IdentityVerdict::kError;
      return id;
    }
  }
  int64_t best = INT64_MAX;
  std::vector<std::pair<int64_t, Candidate>> failed;  // mismatching elements, candidate
  int applicable = 0;
  std::string first_error;
  for (const Candidate& c : candidates_for(id.recipe)) {
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
    const int64_t n = mismatch_count(r);
    failed.emplace_back(n, c);
    if (n < best) {
      best = n;
      id.closest = c.label();
      id.closest_mismatch = first_mismatch(r);
      id.closest_count = n;
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
  if (id.verdict != IdentityVerdict::kNone) {
    id.closest.clear();
    id.closest_mismatch.clear();
    id.closest_count = 0;
    return id;
  }
  std::stable_sort(failed.begin(), failed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [n, c] : failed)
    if (explain_by_rule(f, c, id.path, cpu, id)) break;
  return id;
}

}  // namespace qtc::conformance
