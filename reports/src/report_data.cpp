/// \file report_data.cpp
/// \brief The report's inputs: Google Benchmark JSON, compare.py dumps, `qtc conform` JSON, history records.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <regex>
#include <set>

#include "qtc/error.hpp"
#include "report_internal.hpp"

namespace qtc::report {

std::string_view verdict_name(Comparison::Verdict v) {
  switch (v) {
    case Comparison::Verdict::kRegression: return "regression";
    case Comparison::Verdict::kImprovement: return "improvement";
    case Comparison::Verdict::kSame: return "within spread";
    case Comparison::Verdict::kUntested: return "not tested";
  }
  return "?";
}

std::vector<Comparison> read_comparison(const nlohmann::json& dump, double alpha, double min_change, bool cpu_time,
                                        std::vector<std::string>* problems) {
  using detail::FieldError;
  using detail::int_field;
  using detail::num_field;
  using detail::str_field;
  const char* const kOld = cpu_time ? "cpu_time" : "real_time";
  const char* const kNew = cpu_time ? "cpu_time_other" : "real_time_other";
  const char* const kP = cpu_time ? "cpu_pvalue" : "time_pvalue";
  auto problem = [&](size_t i, const nlohmann::json& e, const FieldError& err) {
    std::string name;
    if (e.is_object() && e.contains("name") && e["name"].is_string()) name = " (" + e["name"].get<std::string>() + ")";
    const std::string line = fmt::format("entry {}{}: {}; the entry is left out", i, name, err.what());
    if (problems == nullptr) throw Error(line);
    problems->push_back(line);
  };
  // compare.py -d writes a list of {name, run_type, aggregate_name, measurements[], time_unit, utest{}}:
  // per-repetition entries ("iteration") carry the U test over all repetitions; the "_median"/"_mean"
  // aggregates carry the central values. We take the U test's p-value for real time and the median's change.
  std::vector<Comparison> out;
  if (!dump.is_array()) return out;
  std::map<std::string, const nlohmann::json*> median, mean;
  for (size_t i = 0; i < dump.size(); ++i) {
    const auto& e = dump[i];
    try {
      if (!e.is_object() || str_field(e, "run_type", "") != "aggregate") continue;
      const std::string agg = str_field(e, "aggregate_name", "");
      const std::string name = str_field(e, "name", "");
      const std::string base = name.size() > agg.size() + 1 ? name.substr(0, name.size() - agg.size() - 1) : name;
      if (agg == "median") median[base] = &e;
      if (agg == "mean") mean[base] = &e;
    } catch (const FieldError& err) {
      problem(i, e, err);
    }
  }
  // The central values of an aggregate entry; FieldError when a measurement is not an object of numbers.
  auto first_measurement = [&](const nlohmann::json& agg) -> const nlohmann::json* {
    if (!agg.contains("measurements") || agg["measurements"].is_null()) return nullptr;
    const auto& ms = agg["measurements"];
    if (!ms.is_array()) throw FieldError("field 'measurements' is a " + std::string(ms.type_name()) + ", expected a list");
    if (ms.empty()) return nullptr;
    if (!ms[0].is_object()) throw FieldError("field 'measurements[0]' is a " + std::string(ms[0].type_name()) + ", expected an object");
    return &ms[0];
  };
  for (size_t i = 0; i < dump.size(); ++i) {
    const auto& e = dump[i];
    try {
      if (!e.is_object() || str_field(e, "run_type", "") == "aggregate") continue;
      const std::string name = str_field(e, "name", "");
      if (name.empty() || name == "OVERALL_GEOMEAN") continue;
      Comparison c;
      c.name = name;
      c.metric = cpu_time ? "CPU time" : "real time";
      c.time_unit = str_field(e, "time_unit", "");
      static const nlohmann::json kNoList = nlohmann::json::array();
      const auto& ms = e.contains("measurements") && !e["measurements"].is_null() ? e["measurements"] : kNoList;
      if (!ms.is_array()) throw FieldError("field 'measurements' is a " + std::string(ms.type_name()) + ", expected a list");
      for (size_t k = 0; k < ms.size(); ++k)
        if (!ms[k].is_object())
          throw FieldError(fmt::format("field 'measurements[{}]' is a {}, expected an object", k, ms[k].type_name()));
      c.reps_old = c.reps_new = static_cast<int>(ms.size());
      const nlohmann::json* central = median.count(name) ? median[name] : (mean.count(name) ? mean[name] : nullptr);
      const nlohmann::json* m0 = central != nullptr ? first_measurement(*central) : nullptr;
      if (m0 != nullptr) {
        c.old_time = num_field(*m0, kOld, 0.0);
        c.new_time = num_field(*m0, kNew, 0.0);
      } else if (!ms.empty()) {  // no aggregates (one repetition): the plain means of the measurements
        for (const auto& m : ms) {
          c.old_time += num_field(m, kOld, 0.0) / static_cast<double>(ms.size());
          c.new_time += num_field(m, kNew, 0.0) / static_cast<double>(ms.size());
        }
      }
      c.change = c.old_time != 0 ? (c.new_time - c.old_time) / std::fabs(c.old_time) : 0.0;
      if (e.contains("utest") && !e["utest"].is_null() && !e["utest"].is_object())
        throw FieldError("field 'utest' is a " + std::string(e["utest"].type_name()) + ", expected an object");
      const auto& ut = e.contains("utest") && e["utest"].is_object() ? e["utest"] : nlohmann::json::object();
      if (ut.is_object() && ut.contains(kP) && ut[kP].is_number()) {
        c.pvalue = ut[kP].get<double>();
        c.reps_old = static_cast<int>(int_field(ut, "nr_of_repetitions", c.reps_old));
        c.reps_new = static_cast<int>(int_field(ut, "nr_of_repetitions_other", c.reps_new));
        const bool significant = *c.pvalue < alpha;
        if (significant && c.change > min_change) c.verdict = Comparison::Verdict::kRegression;
        else if (significant && c.change < -min_change) c.verdict = Comparison::Verdict::kImprovement;
        else c.verdict = Comparison::Verdict::kSame;
      }
      out.push_back(c);
    } catch (const FieldError& err) {
      problem(i, e, err);
    }
  }
  return out;
}

namespace detail {

namespace {
std::string type_text(const json& v) { return v.is_number() ? "number" : std::string(v.type_name()); }
const json* field_or_null(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}
}  // namespace

std::string str_field(const json& o, const char* key, const std::string& dflt) {
  const json* v = field_or_null(o, key);
  if (v == nullptr) return dflt;
  if (!v->is_string()) throw FieldError(fmt::format("field '{}' is a {}, expected a string", key, type_text(*v)));
  return v->get<std::string>();
}

double num_field(const json& o, const char* key, double dflt) {
  const json* v = field_or_null(o, key);
  if (v == nullptr) return dflt;
  if (!v->is_number()) throw FieldError(fmt::format("field '{}' is a {}, expected a number", key, type_text(*v)));
  return v->get<double>();
}

int64_t int_field(const json& o, const char* key, int64_t dflt) {
  const json* v = field_or_null(o, key);
  if (v == nullptr) return dflt;
  if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    return v->get<int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  throw FieldError(fmt::format("field '{}' is {}, expected an integer", key, v->is_number() ? v->dump() : "a " + type_text(*v)));
}

bool bool_field(const json& o, const char* key, bool dflt) {
  const json* v = field_or_null(o, key);
  if (v == nullptr) return dflt;
  if (!v->is_boolean()) throw FieldError(fmt::format("field '{}' is a {}, expected true or false", key, type_text(*v)));
  return v->get<bool>();
}

std::string scalar_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt_num(v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}

double BenchPoint::bandwidth_gbs() const {
  for (const char* k : {"GB/s", "GBps", "GBs"})
    if (auto it = counters.find(k); it != counters.end()) return it->second;
  if (auto it = counters.find("bytes_per_second"); it != counters.end()) return it->second / 1e9;
  return 0.0;
}

double BenchPoint::tflops() const {
  for (const char* k : {"TFLOP/s", "TFLOPS", "TFLOPs", "tflops"})
    if (auto it = counters.find(k); it != counters.end()) return it->second;
  return 0.0;
}

namespace {

double unit_seconds(const std::string& u) {
  if (u == "ns") return 1e-9;
  if (u == "us") return 1e-6;
  if (u == "ms") return 1e-3;
  return 1.0;
}

/// Fields of a benchmark entry that are not user counters.
bool is_builtin_field(const std::string& k) {
  static const std::set<std::string> kFields = {
      "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions", "repetition_index",
      "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name", "aggregate_unit", "label",
      "error_occurred", "error_message", "big_o", "rms"};
  return kFields.count(k) != 0;
}


std::optional<json> read_json(const fs::path& p, std::vector<std::string>& warnings) {
  std::ifstream in(p);
  if (!in) {
    warnings.push_back(fmt::format("cannot open {}", p.string()));
    return std::nullopt;
  }
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    warnings.push_back(fmt::format("{} is not valid JSON: {}", p.string(), e.what()));
    return std::nullopt;
  }
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_copy(const std::string& name) {
  static const std::regex kCopy("^(copy|memcpy).*", std::regex::icase);  // "copy/bf16_4096x4096", "Copy4GiB"
  return std::regex_match(name, kCopy);
}

bool is_cublaslt(const std::string& name) {
  std::string l = name;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return l.find("cublaslt") != std::string::npos || l.find("cublas") != std::string::npos;
}

/// The name without its first '/'-component: what a GEMM and its cuBLASLt counterpart share.
std::string shape_key(const std::string& name) {
  const auto s = name.find('/');
  return s == std::string::npos ? std::string() : name.substr(s + 1);
}

void derive_tables(Model& m) {
  for (const BenchFile& f : m.benches) {
    double copy = 0;
    for (const BenchPoint& p : f.points)
      if (is_copy(p.name) && p.bandwidth_gbs() > 0) {
        copy = p.bandwidth_gbs();
        break;
      }
    std::map<std::string, double> cublas_by_key;
    for (const BenchPoint& p : f.points)
      if (p.tflops() > 0 && is_cublaslt(p.name)) cublas_by_key[shape_key(p.name)] = p.tflops();
    for (const BenchPoint& p : f.points) {
      if (p.tflops() > 0) {
        if (is_cublaslt(p.name)) continue;
        GemmRow g{f.suite, p.name, p.tflops(), 0.0, "cuBLASLt"};
        // The suite's own measurement of the baseline (gemm_cuda: baseline_TFLOPs; frac_of_bf16 says the
        // baseline is a BF16 cuBLASLt GEMM, for NVFP4 on Hopper), else a cuBLASLt entry of the same shape.
        if (p.counters.count("frac_of_bf16")) g.baseline_kind = "cuBLASLt BF16";
        if (auto it = p.counters.find("cublaslt_TFLOP/s"); it != p.counters.end()) g.cublaslt_tflops = it->second;
        else if (auto b = p.counters.find("baseline_TFLOPs"); b != p.counters.end()) g.cublaslt_tflops = b->second;
        else if (auto c = cublas_by_key.find(shape_key(p.name)); c != cublas_by_key.end()) g.cublaslt_tflops = c->second;
        m.gemms.push_back(g);
        continue;
      }
      if (is_copy(p.name) || p.bandwidth_gbs() <= 0) continue;
      BandwidthRow b{f.suite, p.name, p.bandwidth_gbs(), copy, 0.0, p.seconds, -1, -1};
      if (auto c = p.counters.find("copy_GBps"); c != p.counters.end()) b.copy_gbs = c->second;
      if (auto it = p.counters.find("copy_fraction"); it != p.counters.end()) b.fraction = it->second;
      else if (auto f2 = p.counters.find("frac_of_copy"); f2 != p.counters.end()) b.fraction = f2->second;
      else if (copy > 0) b.fraction = b.gbs / copy;
      if (auto it = p.counters.find("peak_extra_x_input"); it != p.counters.end()) b.peak_extra_x_input = it->second;
      if (auto it = p.counters.find("cpu_s_all_threads"); it != p.counters.end()) b.cpu_s_all_threads = it->second;
      m.bandwidth.push_back(b);
    }
  }
}

/// History keys: "<suite>:<name>" without the timing suffixes, so a suite that switches between real,
/// process and manual time keeps one line in the history plot.
std::string history_key(const std::string& suite, std::string name) {
  for (const std::string suffix : {"/real_time", "/process_time", "/manual_time"})
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
  return suite + ":" + name;
}

void read_history(Model& m) {
  if (m.in.history_dir.empty() || !fs::is_directory(m.in.history_dir)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(m.in.history_dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  for (const auto& p : files) {
    auto j = read_json(p, m.warnings);
    if (!j) continue;
    // A record with a mistyped field is left out with a warning: it never stops this report or a later one.
    if (auto h = parse_history_record(*j, p.string(), m.warnings)) {
      h->file = p.filename().string();
      m.history.push_back(std::move(*h));
    }
  }
  std::sort(m.history.begin(), m.history.end(), [](const HistoryRun& a, const HistoryRun& b) {
    return a.date != b.date ? a.date < b.date : a.file < b.file;
  });
}

}  // namespace

std::optional<HistoryRun> parse_history_record(const json& j, const std::string& file, std::vector<std::string>& warnings) {
  if (!j.is_object()) {
    warnings.push_back(fmt::format("history record {} is a JSON {}, not an object; left out", file, j.type_name()));
    return std::nullopt;
  }
  try {
    HistoryRun h;
    h.file = file;
    h.date = str_field(j, "date", "");
    h.commit = str_field(j, "commit", "");
    h.machine_kind = str_field(j, "machine_kind", "");
    if (const auto it = j.find("seconds"); it != j.end() && !it->is_null()) {
      if (!it->is_object()) throw FieldError("field 'seconds' is a " + std::string(it->type_name()) + ", expected an object");
      for (const auto& [k, v] : it->items()) {
        if (!v.is_number()) throw FieldError(fmt::format("field 'seconds' entry '{}' is a {}, expected a number", k, v.type_name()));
        const auto colon = k.find(':');
        h.seconds[colon == std::string::npos ? k : history_key(k.substr(0, colon), k.substr(colon + 1))] = v.get<double>();
      }
    }
    return h;
  } catch (const FieldError& e) {
    warnings.push_back(fmt::format("history record {}: {}; the record is left out", file, e.what()));
    return std::nullopt;
  }
}

BenchFile parse_bench(const json& j, const std::string& path, std::vector<std::string>* warnings) {
  BenchFile f;
  f.path = path;
  if (j.contains("context") && j["context"].is_object())
    for (const auto& [k, v] : j["context"].items()) {
      if (v.is_primitive()) f.context[k] = scalar_text(v);
      if (v.is_array() && k == "load_avg") {  // other builds running while benchmarking show up here
        std::string joined;
        for (const auto& e : v) joined += (joined.empty() ? "" : " ") + scalar_text(e);
        f.context[k] = joined;
      }
    }
  f.suite = f.context.count("qtc_suite") ? f.context["qtc_suite"] : fs::path(path).stem().string();
  // Group entries by run name: a run with repetitions contributes its median aggregate (else its mean,
  // else the first repetition); a run without repetitions contributes its one entry.
  struct Group {
    int64_t family = -1;  // registration order: random interleaving shuffles the entries, not the families
    const json* median = nullptr;
    const json* mean = nullptr;
    const json* first = nullptr;
    int reps = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  static const json kNone = json::array();
  const json& list = j.is_object() && j.contains("benchmarks") && j["benchmarks"].is_array() ? j["benchmarks"] : kNone;
  // An entry with a mistyped field is left out, named in a warning with its file and field.
  auto problem = [&](size_t i, const json& b, const std::string& what) {
    std::string name;
    if (b.is_object() && b.contains("name") && b["name"].is_string()) name = " (" + b["name"].get<std::string>() + ")";
    const std::string line = fmt::format("{}: benchmark entry {}{}: {}; the entry is left out", path, i, name, what);
    if (warnings == nullptr) throw FieldError(line);
    warnings->push_back(line);
  };
  for (size_t i = 0; i < list.size(); ++i) {  // Group keeps pointers into `list`: iterate the document itself, not a copy
    const json& b = list[i];
    try {
      if (!b.is_object() || bool_field(b, "error_occurred", false)) continue;
      const std::string run = str_field(b, "run_name", str_field(b, "name", ""));
      if (run.empty()) continue;
      const int64_t family = int_field(b, "family_index", -1);
      const std::string type = str_field(b, "run_type", "iteration");
      const std::string agg = type == "aggregate" ? str_field(b, "aggregate_name", "") : "";
      // The fields the report reads from the entry it keeps for the run (checked here, on every entry).
      (void)str_field(b, "time_unit", "ns");
      (void)num_field(b, "real_time", 0.0);
      if (!groups.count(run)) order.push_back(run);
      Group& g = groups[run];
      if (g.family < 0 && family >= 0) g.family = family;
      if (type == "aggregate") {
        if (agg == "median") g.median = &b;
        if (agg == "mean") g.mean = &b;
      } else {
        if (g.first == nullptr) g.first = &b;
        ++g.reps;
      }
    } catch (const FieldError& e) {
      problem(i, b, e.what());
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) { return groups[a].family < groups[b].family; });
  for (const auto& run : order) {
    const Group& g = groups[run];
    const json* e = g.median ? g.median : (g.mean ? g.mean : g.first);
    if (e == nullptr) continue;
    BenchPoint p;
    p.suite = f.suite;
    p.name = run;
    p.time_unit = str_field(*e, "time_unit", "ns");  // checked on every entry above
    p.real_time = num_field(*e, "real_time", 0.0);
    p.seconds = p.real_time * unit_seconds(p.time_unit);
    p.repetitions = std::max(1, g.reps);
    for (const auto& [k, v] : e->items())
      if (!is_builtin_field(k) && v.is_number()) p.counters[k] = v.get<double>();
    f.points.push_back(p);
  }
  return f;
}

json history_record(const Model& m) {
  json j;
  j["date"] = m.generated_utc;
  std::string commit, kind;
  for (const auto& f : m.benches) {
    if (commit.empty() && f.context.count("qtc_commit")) commit = f.context.at("qtc_commit");
    if (kind.empty() && f.context.count("qtc_machine_kind")) kind = f.context.at("qtc_machine_kind");
  }
  j["commit"] = commit;
  j["machine_kind"] = kind;
  json secs = json::object();
  for (const auto& f : m.benches)
    for (const auto& p : f.points) secs[history_key(f.suite, p.name)] = p.seconds;
  j["seconds"] = secs;
  return j;
}

Model build_model(const Inputs& in) {
  Model m;
  m.in = in;
  m.generated_utc = utc_now();
  for (const auto& p : in.bench_json)
    if (auto j = read_json(p, m.warnings)) m.benches.push_back(parse_bench(*j, p.string(), &m.warnings));
  for (const bool cpu : {false, true})
    for (const auto& p : cpu ? in.compare_cpu_json : in.compare_json)
      if (auto j = read_json(p, m.warnings)) {
        if (!j->is_array()) {
          m.warnings.push_back(fmt::format("{} is not a compare.py dump (expected a JSON list)", p.string()));
          continue;
        }
        std::vector<std::string> problems;
        for (auto& c : read_comparison(*j, in.alpha, in.min_change, cpu, &problems)) m.comparison.push_back(std::move(c));
        for (const auto& line : problems) m.warnings.push_back(p.string() + ": " + line);
      }
  for (const auto& p : in.conform_json)
    if (auto j = read_json(p, m.warnings)) parse_conform(*j, p.string(), m.conform, &m.warnings);
  if (in.conform) parse_conform(*in.conform, "qtc conform", m.conform, &m.warnings);
  derive_tables(m);
  read_history(m);
  if (!m.benches.empty()) {  // this run is the newest point of the history plot
    const json r = history_record(m);
    HistoryRun h{"(this run)", r["date"], r["commit"], r["machine_kind"], {}};
    for (const auto& [k, v] : r["seconds"].items()) h.seconds[k] = v.get<double>();
    m.history.push_back(h);
  }
  return m;
}

}  // namespace detail
}  // namespace qtc::report
