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

std::string first_mismatch(const FileResult& r) { return r.mismatches.empty() ? r.message : mismatch_text(r.mismatches.front()); }

/// Mismatching elements of a failed verification, from its records (a tensor that could not be compared, e.g. of a
/// wrong shape, counts as one; a failure without records as one).
int64_t mismatch_count(const FileResult& r) {
  const int64_t n = r.mismatching_elements();
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

std::string implementation_of(const std::string& source) {
  std::string words[4];
  size_t at = 0;
  for (std::string& w : words) {
    while (at < source.size() && std::isspace(static_cast<unsigned char>(source[at]))) ++at;
    while (at < source.size() && !std::isspace(static_cast<unsigned char>(source[at]))) w += source[at++];
    while (!w.empty() && (w.back() == ':' || w.back() == ',' || w.back() == ';')) w.pop_back();
  }
  if (words[0].empty()) return "(no source)";
  if (words[2] == "on" && !words[3].empty()) return words[0] + " " + words[1] + " on " + words[3];  // a device path
  return words[1].empty() ? words[0] : words[0] + " " + words[1];
}

ImplementationVerdict implementation_verdict(const std::string& implementation, const std::vector<std::filesystem::path>& paths,
                                             const std::vector<VectorIdentity>& ids, QuantizeBackend& cpu) {
  QTC_CHECK(paths.size() == ids.size(), "implementation_verdict: ", paths.size(), " paths for ", ids.size(), " identities");
  ImplementationVerdict v;
  v.implementation = implementation;
  v.files = static_cast<int>(ids.size());
  std::vector<std::pair<std::string, int>> counts;  // profile -> files, in profile.hpp's order
  for (const ProfileRules& p : all_profiles()) counts.emplace_back(p.name, 0);
  auto profile_of = [](const std::string& label) { return label.substr(0, label.find('+')); };
  for (const VectorIdentity& id : ids) {
    if (id.verdict == IdentityVerdict::kError) {
      ++v.errors;
      continue;
    }
    for (auto& [name, n] : counts) {
      bool hit = false;
      for (const std::string& m : id.matches) hit = hit || profile_of(m) == name;
      n += hit ? 1 : 0;
    }
  }
  for (const auto& c : counts)
    if (c.second > v.best_count) {
      v.best = c.first;
      v.best_count = c.second;
    }
  for (const auto& c : counts)
    if (c.second > 0) v.reproduced_by.push_back(c);
  std::stable_sort(v.reproduced_by.begin(), v.reproduced_by.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  // The files the best profile does not reproduce; without a best one, every profile is tried as the base, those
  // most files are closest to first, and the first whose one changed rule reproduces all of them is named.
  std::vector<std::string> bases;
  if (!v.best.empty()) {
    bases.push_back(v.best);
  } else {
    std::vector<std::pair<std::string, int>> closest;
    for (const ProfileRules& p : all_profiles()) closest.emplace_back(p.name, 0);
    for (const VectorIdentity& id : ids)
      for (auto& c : closest) c.second += (id.verdict == IdentityVerdict::kNone && profile_of(id.closest) == c.first) ? 1 : 0;
    std::stable_sort(closest.begin(), closest.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& c : closest) bases.push_back(c.first);
  }
  for (size_t bi = 0; bi < bases.size(); ++bi) {
    const std::string& base = bases[bi];
    std::vector<size_t> differ;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].verdict == IdentityVerdict::kError) continue;
      bool hit = false;
      for (const std::string& m : ids[i].matches) hit = hit || profile_of(m) == base;
      if (!hit) differ.push_back(i);
    }
    if (bi == 0) {
      v.differing = static_cast<int>(differ.size());
      v.base = base;
    }
    if (differ.empty()) return v;
    // One rule of `base`, changed, must reproduce every differing file (MXFP8: under some scale rule the variant
    // defines); the first such rule in rule_toggles' order is named.
    const ProfileRules& pr = profile_rules(profile_from_name(base));
    for (const RuleToggle& t : rule_toggles()) {
      ProfileRules var = pr;
      if (!t.apply(var)) continue;
      var.name = pr.name + "~" + t.rule;
      var.follows = pr.follows + " with " + t.rule + " " + t.alternative;
      register_profile_variant(var);
      bool all = true;
      for (size_t i : differ) {
        io::File f;
        try {
          f = io::read_file(paths[i]);
        } catch (const Error&) {
          all = false;
          break;
        }
        bool ok = false;
        const bool mx = f.metadata.count("recipe") != 0 && f.metadata.at("recipe") == "mxfp8";
        std::vector<std::string> rules;
        if (mx)
          for (MxScaleRule r : var.mx_scale_rules) rules.emplace_back(mx_scale_rule_name(r));
        else
          rules.emplace_back();
        for (const std::string& sr : rules) {
          io::File g = f;
          g.metadata["profile"] = var.name;
          if (!sr.empty()) g.metadata["scale_rule"] = sr;
          ok = verify_vector(g, paths[i].string() + " as " + var.name, cpu).verdict == Verdict::kPass;
          if (ok) break;
        }
        if (!ok) {
          all = false;
          break;
        }
      }
      if (all) {
        v.differing = static_cast<int>(differ.size());
        v.base = base;
        v.rule = t.rule;
        v.change = t.alternative;
        return v;
      }
    }
  }
  return v;
}

std::string implementation_line(const ImplementationVerdict& v) {
  const int identified = v.files - v.errors;
  std::string s = "IMPL  " + v.implementation + ": " + std::to_string(v.files) + " files";
  if (v.errors != 0) s += " (" + std::to_string(v.errors) + " errors)";
  if (v.best.empty()) {
    s += "; no profile reproduces any of them";
  } else {
    s += "; " + v.best + " reproduces " + std::to_string(v.best_count) + " of " + std::to_string(identified);
    std::string others;
    for (const auto& [p, n] : v.reproduced_by)
      if (p != v.best) others += (others.empty() ? "" : ", ") + p + " " + std::to_string(n);
    if (!others.empty()) s += " (also " + others + ")";
  }
  if (v.differing == 0) return s;
  const std::string n = std::to_string(v.differing);
  const std::string which = v.best.empty() ? "the " + n + " files (nearest profile " + v.base + ")" : "the other " + n;
  if (!v.rule.empty())
    return s + "; " + which + ": rule " + v.rule + " of " + v.base + " explains all " + n + " (" + v.base + " with " + v.rule + " " +
           v.change + " reproduces every one)";
  return s + "; " + which + ": no single rule of " + (v.best.empty() ? std::string("any profile") : v.base) + " explains all " + n;
}

}  // namespace qtc::conformance
