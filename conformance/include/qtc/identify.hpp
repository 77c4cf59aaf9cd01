/// \file identify.hpp
/// \brief Attribution of a vector to the profiles (and MXFP8 scale rules) that reproduce it bit for bit: the logic
///        of `qtc identify`, and of the divergence table that `qtc conform` writes into its report
///        (DIVERGENCES.md: a foreign output is checked against the profile it claims, and otherwise attributed to
///        the rules it follows, or to none with the first mismatch).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// How a vector relates to the profiles qtc models.
enum class IdentityVerdict {
  kClaimed,  ///< the profile (and scale rule) its metadata claims reproduces it (others may too)
  kOther,    ///< only profiles other than the claimed one reproduce it: the producer follows other rules
  kNone,     ///< no profile reproduces it: a divergence qtc does not model (or a wrong output)
  kError,    ///< unreadable, or no profile defines its recipe
};

/// "OK", "OTHER", "NONE", "ERROR" (the line tags of `qtc identify`).
const char* identity_tag(IdentityVerdict v);

struct VectorIdentity {
  std::string path;
  std::string source;                  ///< metadata `source` (who produced the expected outputs), or empty
  std::string recipe;                  ///< metadata `recipe`
  std::string claimed;                 ///< e.g. "te", "torchao", "ocp+ocp_floor"
  std::vector<std::string> matches;    ///< every candidate that reproduces all expected tensors
  std::string claimed_mismatch;        ///< when the claimed candidate fails: its first mismatching tensor
  std::string closest;                 ///< when nothing matches: the candidate with the fewest mismatching tensors
  std::string closest_mismatch;        ///< ... and its first mismatch
  int64_t closest_count = 0;           ///< ... and its number of mismatching elements
  std::string explaining_profile;      ///< kNone: the profile (nearest first) one of whose rules, changed, reproduces
  std::string explaining_rule;         ///< the file, and that rule (profile.hpp rule_toggles), e.g. "torchao" and
                                       ///< "nvfp4.zero_and_tiny_block_scale"
  std::string explaining_change;       ///< ... and the change, e.g. "flipped"; both empty when no single rule does
  std::string error;                   ///< kError: why
  IdentityVerdict verdict = IdentityVerdict::kError;
};

/// Verifies the vector at `path` once per candidate profile (its own recipe with the metadata keys `profile`, and
/// for MXFP8 `scale_rule`, replaced; every profile of profile.hpp, MXFP8 with every scale rule it defines) on
/// `cpu`. When none reproduces it, the candidates are re-run, nearest (fewest mismatching elements) first, with one
/// rule changed at a time (rule_toggles, in their order); the first change that reproduces the file is the rule
/// that explains the mismatch.
VectorIdentity identify_vector(const std::filesystem::path& path, QuantizeBackend& cpu);
/// The same for a vector held in memory; `source` names it (VectorIdentity::path).
VectorIdentity identify_vector(const io::File& file, const std::string& source, QuantizeBackend& cpu);

/// For a kNone identity: "rule R of P explains it: P with R <change> reproduces it bit for bit", or "no single rule
/// of any profile explains it".
std::string rule_explanation(const VectorIdentity& id);

/// The implementation a vector's `source` names: its first two words (package and version, e.g. "nvidia-modelopt
/// 0.47.0", "torchao 0.18.0"), without a trailing ':' or ','; when the third word is "on", the fourth too: the
/// device path of that package, an implementation of its own ("compressed-tensors 0.20.0 on CUDA"); "(no source)"
/// when it is empty.
std::string implementation_of(const std::string& source);

/// One verdict per implementation (the files of one `source` implementation, identified one by one).
struct ImplementationVerdict {
  std::string implementation;
  int files = 0;       ///< files read (errors included)
  int errors = 0;      ///< files that could not be identified
  std::vector<std::pair<std::string, int>> reproduced_by;  ///< profile -> files it reproduces (any scale rule), most first
  std::string best;    ///< the profile that reproduces most files ("" when none reproduces any)
  int best_count = 0;
  int differing = 0;   ///< files (not errors) that `best` (or, when none reproduces any, the commonest closest
                       ///< profile) does not reproduce
  std::string rule;    ///< the rule of that profile whose change reproduces ALL differing files (empty: none does)
  std::string change;  ///< ... and the change
  std::string base;    ///< the profile the rule belongs to (best, or when none reproduces a file, the first profile
                       ///< one of whose rules explains all files; else the one most files are closest to)
};

/// The verdict of one implementation from its files' identities (`ids[i]` of `paths[i]`): which profile reproduces
/// how many files, and, for the files the best one does not reproduce, the one rule whose change reproduces every
/// one of them (re-verified on `cpu`; a rule that explains only some of them is never named).
ImplementationVerdict implementation_verdict(const std::string& implementation, const std::vector<std::filesystem::path>& paths,
                                             const std::vector<VectorIdentity>& ids, QuantizeBackend& cpu);
/// "IMPL  <implementation>: <files> files; <best> reproduces N; ..." (one line, what `qtc identify` prints).
std::string implementation_line(const ImplementationVerdict& v);

/// "te, te_pyref" (or "-" when empty).
std::string join_labels(const std::vector<std::string>& v);

}  // namespace qtc::conformance
