#include "cli/trace_cmd.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/flag_table.h"
#include "traces/category_map.h"
#include "traces/config.h"
#include "traces/fit.h"
#include "traces/model.h"
#include "traces/readers.h"
#include "traces/stats.h"
#include "traces/writers.h"

namespace faultline::traces {

using cli::FlagTable;

namespace {

constexpr const char* kTraceHelp = R"TXT(usage: faultline trace <command> [options]

commands:
  stats FILE            events, nodes, span, fault rate, MTBF, classes, repair and arrival statistics
  fit FILE [-o M.json]  maximum-likelihood fits (exponential, Weibull, lognormal) of per-node time
                        between failures and of repair times; -o writes a scenario fault model
  convert IN OUT        between formats (canonical jsonl/csv, infinitehbd, oobleck)
  mix NAME              a published incident mix as a scenario fault model, at its published
                        rate or rescaled
  generate FILE         a synthetic trace drawn from the fit of FILE

Formats (--from / --to): jsonl, csv (the canonical format, traces/FORMAT.md), infinitehbd,
oobleck, columns (any CSV / JSON Lines / JSON log, with --columns MAP.json), fta (the Failure
Trace Archive's event traces; --from only); default: detected (never fta).
Run 'faultline trace <command> --help' for its options.
)TXT";

// Each command's usage line and the paragraphs of its --help before the options, which
// are generated from its table.
struct Text {
  const char *usage, *about;
};

constexpr Text kStats = {
    "faultline trace stats FILE [options]",
    R"TXT(Counts events, faults and nodes; the span from the first to the last event; faults per
1,000 node-days and the fleet MTBF; faults per level and class; repair times (median,
mean, p90) of paired fault_start/fault_end; fleet-wide and per-node inter-arrival times.

The rate divides by a node count: --nodes when given, else the fleet size the trace
declares (400 for InfiniteHBD, "fleet_nodes" in the canonical meta record), else the
distinct nodes of the trace. The output names the one used.)TXT"};

constexpr Text kFit = {
    "faultline trace fit FILE [options]",
    R"TXT(Fits exponential, Weibull and lognormal distributions by maximum likelihood, with
right-censoring (fault-free stretches at the end of the trace, faults still open), to
  - per-node time between failures (days), overall and per class,
  - repair times (hours), overall and per class,
and reports log-likelihood, AIC, 95% confidence intervals of the parameters (Wald, from
the observed information, log scale for positive parameters), the Kolmogorov-Smirnov
distance to the Kaplan-Meier estimate, and the likelihood-ratio test of the exponential
against the Weibull (chi-squared, 1 df) with a recommendation: the exponential unless the
test rejects it, then the Weibull or the lognormal, whichever has the lower AIC.

With -o, writes a fault model in the scenario's "faults" format: one category per
mapping-table category, with the trace's rate per machine-day, the recommended family of
its per-node gaps (none for the exponential, else weibull_shape or lognormal_sigma; from
10 observed gaps on) and its mean repair time; stderr gives each category's
recommendation, with its p-value. A value outside the scenario schema (a lognormal_sigma
above 10, a weibull_shape below 0.05, ...) is not clipped: each is reported in one line,
nothing is written and the exit status is 2; the report without -o flags it with "!".
Use the model in a scenario as "faults", or: --set "faults=$(cat model.json)".)TXT"};

constexpr Text kConvert = {
    "faultline trace convert IN OUT [options]",
    R"TXT(Reads IN in any known format and writes OUT ("-" = stdout). The canonical formats
(jsonl, csv) are lossless in both directions; infinitehbd and oobleck hold less, and a
note on stderr says what was dropped.)TXT"};

constexpr Text kMix = {
    "faultline trace mix NAME (--machines N | --gpus N) [--incidents-per-day X]\n"
    "                         [--days D] [-o FILE]\n"
    "       faultline trace mix --list",
    R"TXT(Writes a published incident mix as a scenario fault model ({"categories": [...]}) for a
job of N machines (--gpus N: N / --gpus-per-machine machines).

At the published rate (the default, for a mix whose source gives one, e.g. llama3-405b:
419 interruptions in 54 days on 2,048 machines of 8 GPUs), machine-scope categories get
the source's count per machine-day and job-wide ones its count per day, whatever the
job's size: `faultline trace mix llama3-405b --gpus 16384 --days 54` is the published job.
With --incidents-per-day X (required for byterobust-table1, whose table gives no rate for
one job), the job sees X incidents a day: machine-scope categories get
rate_per_machine_day = X * share / N, job-wide ones rate_per_job_day = X * share.
traces/models/ holds each mix at its source's job, and README.md there each row's mapping.)TXT"};

constexpr Text kGenerate = {
    "faultline trace generate FILE [options]",
    R"TXT(Fits FILE (as 'trace fit' does) and draws a synthetic trace from the fit: per node and
class a renewal process in equilibrium with the class's rate and Weibull shape,
descriptions in the class's proportions, repair times from the best repair fit.)TXT"};

int usage(const std::string& msg) {
  std::fprintf(stderr, "faultline: trace: %s (see --help)\n", msg.c_str());
  return 2;
}

bool to_int(const std::string& s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool to_double(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Options shared by the commands that read a trace.
struct Input {
  std::string path;
  Format format = Format::kAuto;
  std::string columns;
  bool strict = false;
  long long max_issues = 20;
};

// A format the writers support (--to). False when `v` is not one of them.
bool output_format(const std::string& v, Format* to) {
  return parse_format(v, to) && *to != Format::kAuto && *to != Format::kColumns &&
         *to != Format::kFta;
}

// A value check of a trace command's option: `ok(v)` or the usage error `msg`.
template <class Ok>
std::function<std::string(const std::string&)> checked(std::string msg, Ok ok) {
  return [msg, ok](const std::string& v) { return ok(v) ? std::string() : msg; };
}

// The table of a trace command: its --help generated from `text` and its options, its
// messages "faultline: trace: ...".
FlagTable trace_table(const Text& text) {
  return FlagTable("faultline: trace", text.usage, text.about);
}

// The options every trace-reading command takes (--from, --columns, --strict, --max-issues).
void add_input_flags(FlagTable& flags, Input& in) {
  flags.add({"--from", "FORMAT", "",
             "jsonl|csv|infinitehbd|oobleck|columns|fta (default: detected from the\n"
             "file; fta is never detected)",
             checked("--from: expected jsonl|csv|infinitehbd|oobleck|columns|fta",
                     [&in](const std::string& v) { return parse_format(v, &in.format); })});
  flags.add({"--columns", "MAP.json", "a column-map file",
             "column map for a log in another layout (implies --from columns)",
             [&in](const std::string& v) {
               in.columns = v;
               in.format = Format::kColumns;
               return std::string();
             }});
  flags.toggle("--strict", "stop at the first bad record (exit 2) instead of skipping it",
               &in.strict);
  flags.add({"--max-issues", "N", "", "print at most N bad-record messages (default 20)",
             checked("--max-issues: expected an integer >= 0", [&in](const std::string& v) {
               return to_int(v, 0, 1LL << 40, &in.max_issues);
             })});
}

// --format table|json of stats and fit.
void add_format_flag(FlagTable& flags, std::string& format, const char* help) {
  flags.add({"--format", "table|json", "table or json", help,
             checked("--format: expected table or json", [&format](const std::string& v) {
               if (v != "table" && v != "json") return false;
               format = v;
               return true;
             })});
}

// --to FORMAT of convert and generate.
void add_to_flag(FlagTable& flags, Format& to, const char* help) {
  flags.add({"--to", "FORMAT", "jsonl|csv|infinitehbd|oobleck", help,
             checked("--to: expected jsonl|csv|infinitehbd|oobleck",
                     [&to](const std::string& v) { return output_format(v, &to); })});
}

// -o/--out FILE.
void add_out_flag(FlagTable& flags, std::string& out, const char* help) {
  flags.add({"--out", "FILE", "a file", help,
             [&out](const std::string& v) {
               out = v;
               return std::string();
             },
             "-o"});
}

// An integer option NAME in [lo, hi] with its message.
void add_int_flag(FlagTable& flags, const std::string& name, const std::string& arg,
                  const std::string& help, const std::string& msg, long long lo, long long hi,
                  long long& out) {
  flags.add({name, arg, "", help, checked(msg, [lo, hi, &out](const std::string& v) {
               return to_int(v, lo, hi, &out);
             })});
}

// The positional arguments of a command: each into the first of `slots` still empty.
std::function<std::string(const std::string&)> into(std::vector<std::string*> slots) {
  return [slots](const std::string& a) {
    for (auto* s : slots)
      if (s->empty()) {
        *s = a;
        return std::string();
      }
    return "unexpected argument " + a;
  };
}

// Reads the input trace; prints issues; returns false (with the exit code) on failure.
bool read_input(const Input& in, Trace* out, int* code) {
  ColumnMap columns;
  const ColumnMap* cols = nullptr;
  if (in.format == Format::kColumns) {
    if (in.columns.empty()) {
      *code = usage("--from columns needs --columns MAP.json");
      return false;
    }
    try {
      columns = load_column_map(in.columns);
    } catch (const TraceError& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      *code = 2;
      return false;
    }
    cols = &columns;
  }
  PrintingReporter rep(stderr, static_cast<std::size_t>(in.max_issues));
  ReadOptions ro;
  ro.strict = in.strict;
  ro.reporter = &rep;
  ReadResult r = read_trace_file(in.path, in.format, ro, cols);
  if (!r.error.empty()) {
    std::fprintf(stderr, "faultline: %s\n", r.error.c_str());
    *code = 2;
    return false;
  }
  if (r.stopped) {
    std::fprintf(stderr, "faultline: %s: stopped at the first bad record (--strict)\n",
                 in.path.c_str());
    *code = 2;
    return false;
  }
  if (r.issues > 0) {
    std::fprintf(
        stderr, "faultline: %s: %zu issue(s), %zu bad record(s) skipped, %zu records read%s\n",
        in.path.c_str(), r.issues, r.skipped, r.records,
        r.issues > static_cast<std::size_t>(in.max_issues) ? " (--max-issues to see more)" : "");
  }
  *out = std::move(r.trace);
  return true;
}

Format format_from_extension(const std::string& path) {
  auto ends = [&](const char* suf) {
    const std::string s(suf);
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".jsonl") || ends(".ndjson")) return Format::kJsonl;
  if (ends(".csv")) return Format::kCsv;
  if (ends(".json")) return Format::kInfiniteHbd;
  return Format::kAuto;
}

int stats(const std::vector<std::string>& args) {
  Input in;
  std::string format = "table";
  long long nodes = 0;
  auto flags = trace_table(kStats);
  add_format_flag(flags, format, "output (default table)");
  add_int_flag(flags, "--nodes", "N", "fleet size to divide by",
               "--nodes: expected an integer >= 1", 1, 100'000'000, nodes);
  add_input_flags(flags, in);
  flags.positional(into({&in.path}));
  if (const int rc = flags.parse(args); rc >= 0) return rc;
  if (in.path.empty()) return usage("stats: expected FILE");
  Trace t;
  int code = 0;
  if (!read_input(in, &t, &code)) return code;
  StatsOptions so;
  so.nodes = static_cast<int>(nodes);
  const TraceStats s = compute_stats(t, so);
  if (format == "json")
    std::cout << stats_json(s).dump(2) << "\n";
  else
    std::cout << stats_table(s);
  return 0;
}

int fit(const std::vector<std::string>& args) {
  Input in;
  std::string format = "table", out, mapping;
  long long nodes = 0, min_samples = 5;
  double resolution_s = 0;
  bool after_first_fault = false;
  auto flags = trace_table(kFit);
  add_out_flag(flags, out, "write the fault model");
  flags.add({"--mapping", "MAP.json", "a mapping file",
             "trace class -> simulator category table (default: one crash category\n"
             "per class); shipped: traces/mappings/infinitehbd.json",
             [&mapping](const std::string& v) {
               mapping = v;
               return std::string();
             }});
  add_format_flag(flags, format, "fit report (default table)");
  add_int_flag(flags, "--nodes", "N", "fleet size (see stats)", "--nodes: expected an integer >= 1",
               1, 100'000'000, nodes);
  add_int_flag(flags, "--min-samples", "N",
               "fewest observed values for a fit (default 5; 10 for the model's shapes)",
               "--min-samples: expected an integer >= 2", 2, 1'000'000, min_samples);
  flags.add({"--time-resolution", "S", "",
             "fault times are recorded only to S seconds (86400: dates without a\n"
             "time): a fault at T happened in [T, T + S), and the times between\n"
             "failures are fitted interval-censored (default 0: exact times; the\n"
             "fault model of -o still reads them as exact)",
             checked("--time-resolution: expected seconds in [0, 1e9]", [&resolution_s](
                                                                            const std::string& v) {
               return to_double(v, &resolution_s) && resolution_s >= 0 && resolution_s <= 1e9;
             })});
  flags.toggle("--after-first-fault",
               "times between failures from each node's first fault on: the\n"
               "stretch before it started at an unknown earlier fault and is not\n"
               "a gap (reading it as one pulls a Weibull shape toward 1); fault-free\n"
               "nodes are left out (the fault model of -o is unchanged)",
               &after_first_fault);
  add_input_flags(flags, in);
  flags.positional(into({&in.path}));
  if (const int rc = flags.parse(args); rc >= 0) return rc;
  if (in.path.empty()) return usage("fit: expected FILE");
  CategoryMap map;
  if (!mapping.empty()) {
    try {
      map = load_category_map(mapping);
    } catch (const TraceError& e) {
      std::fprintf(stderr, "faultline: %s\n", e.what());
      return 2;
    }
  }
  Trace t;
  int code = 0;
  if (!read_input(in, &t, &code)) return code;
  t.sort_by_time();
  FitOptions fo;
  fo.nodes = static_cast<int>(nodes);
  fo.min_samples = static_cast<std::size_t>(min_samples);
  fo.time_resolution_s = resolution_s;
  fo.after_first_fault = after_first_fault;
  const TraceFit f = fit_trace(t, fo);
  if (format == "json")
    std::cout << fit_json(f).dump(2) << "\n";
  else
    std::cout << fit_table(f);
  if (!out.empty()) {
    if (mapping.empty()) map = identity_category_map(t);
    ModelOptions mo;
    mo.nodes = static_cast<int>(nodes);
    mo.min_samples = std::max<std::size_t>(10, static_cast<std::size_t>(min_samples));
    const FaultModel fm = fault_model(t, map, mo);
    // A fit the scenario loader would refuse is the trace's problem (an input problem,
    // exit 2): every such value in one line each, and no file, rather than a model
    // clipped to the schema's limits.
    if (!fm.ok()) {
      for (const auto& r : fm.refused)
        std::fprintf(stderr, "faultline: %s: %s; %s not written\n", in.path.c_str(), r.c_str(),
                     out == "-" ? "the fault model" : out.c_str());
      return 2;
    }
    std::string err;
    if (!write_text_file(out, fm.model.dump(2) + "\n", &err)) {
      std::fprintf(stderr, "faultline: %s\n", err.c_str());
      return 1;
    }
    for (const auto& n : fm.notes) std::fprintf(stderr, "faultline: model: %s\n", n.c_str());
    if (out != "-")
      std::fprintf(stderr, "faultline: wrote fault model (%zu categories) to %s\n",
                   map.names.size(), out.c_str());
  }
  return 0;
}

int convert(const std::vector<std::string>& args) {
  Input in;
  std::string out;
  Format to = Format::kAuto;
  bool sort = false;
  auto flags = trace_table(kConvert);
  add_to_flag(flags, to,
              "jsonl|csv|infinitehbd|oobleck (default: from OUT's extension:\n"
              ".jsonl, .csv, .json = infinitehbd)");
  flags.toggle("--sort", "write events in time order (default: as read)", &sort);
  add_input_flags(flags, in);
  flags.positional(into({&in.path, &out}));
  if (const int rc = flags.parse(args); rc >= 0) return rc;
  if (in.path.empty() || out.empty()) return usage("convert: expected IN OUT");
  if (to == Format::kAuto) to = format_from_extension(out);
  if (to == Format::kAuto)
    return usage("convert: cannot tell the output format from '" + out + "'; use --to");
  Trace t;
  int code = 0;
  if (!read_input(in, &t, &code)) return code;
  if (sort) t.sort_by_time();
  const WriteResult w = write_trace(t, to);
  std::string err;
  if (!write_text_file(out, w.text, &err)) {
    std::fprintf(stderr, "faultline: %s\n", err.c_str());
    return 1;
  }
  for (const auto& n : w.notes) std::fprintf(stderr, "faultline: convert: %s\n", n.c_str());
  return 0;
}

int mix(const std::vector<std::string>& args) {
  std::string name, out = "-";
  double rate = NAN, days = NAN;
  long long machines = 0, gpus = 0, per_machine = 0;
  bool list = false;
  auto flags = trace_table(kMix);
  add_int_flag(flags, "--machines", "N", "machines in the job",
               "--machines: expected an integer >= 1", 1, 100'000'000, machines);
  add_int_flag(flags, "--gpus", "N", "GPUs in the job, a multiple of --gpus-per-machine",
               "--gpus: expected an integer >= 1", 1, 1'000'000'000, gpus);
  add_int_flag(flags, "--gpus-per-machine", "G",
               "GPUs per machine for --gpus (default: the mix's source's, 8)",
               "--gpus-per-machine: expected an integer in [1, 1024]", 1, 1024, per_machine);
  flags.add({"--incidents-per-day", "X", "",
             "incidents per day for the whole job (default: the published rate)",
             checked("--incidents-per-day: expected a number > 0",
                     [&rate](const std::string& v) { return to_double(v, &rate) && rate > 0; })});
  flags.add({"--days", "D", "",
             "the job's length: stderr gives the incidents a day and the\n"
             "number expected in D days (the model's rates are per day: D\n"
             "changes none of them)",
             checked("--days: expected a number in (0, 100000]", [&days](const std::string& v) {
               return to_double(v, &days) && days > 0 && days <= 1e5;
             })});
  add_out_flag(flags, out, "write to FILE (default stdout)");
  flags.toggle("--list", "the built-in mixes", &list);
  flags.positional(into({&name}));
  if (const int rc = flags.parse(args); rc >= 0) return rc;
  if (list) {
    for (const auto& n : mix_names())
      std::printf("%-20s %s\n", n.c_str(), mix_description(n).c_str());
    return 0;
  }
  if (name.empty()) return usage("mix: expected a mix name (--list shows them)");
  PublishedRate published;
  try {
    published = mix_published_rate(name);
  } catch (const TraceError& e) {
    return usage(e.what());
  }
  if (machines > 0 && gpus > 0) return usage("mix: expected --machines N or --gpus N, not both");
  if (per_machine > 0 && gpus == 0) return usage("--gpus-per-machine: only with --gpus");
  if (gpus > 0) {
    if (per_machine == 0)
      per_machine = published.gpus_per_machine > 0 ? published.gpus_per_machine : 8;
    if (gpus % per_machine != 0)
      return usage("--gpus: expected a multiple of " + std::to_string(per_machine) +
                   " (GPUs per machine), got " + std::to_string(gpus));
    machines = gpus / per_machine;
    if (machines > 100'000'000) return usage("--gpus: expected at most 100,000,000 machines");
  }
  if (machines == 0) return usage("mix: expected --machines N or --gpus N");
  if (std::isnan(rate) && !published.published())
    return usage("mix: " + name +
                 " has no published rate for one job: expected --incidents-per-day X");
  nlohmann::ordered_json model;
  try {
    model = published_mix(name, rate, static_cast<int>(machines));
  } catch (const TraceError& e) {
    return usage(e.what());
  }
  std::string err;
  if (!write_text_file(out, model.dump(2) + "\n", &err)) {
    std::fprintf(stderr, "faultline: %s\n", err.c_str());
    return 1;
  }
  if (!std::isnan(days)) {
    const double per_day = mix_incidents_per_day(model, static_cast<int>(machines));
    std::fprintf(stderr,
                 "faultline: mix: %s on %lld machines: %.4g incidents a day, %.1f expected in "
                 "%g days\n",
                 name.c_str(), machines, per_day, per_day * days, days);
  }
  return 0;
}

int generate(const std::vector<std::string>& args) {
  Input in;
  std::string out = "-";
  Format to = Format::kAuto;
  long long nodes = 0, seed = 1;
  double days = 0;
  auto flags = trace_table(kGenerate);
  add_out_flag(flags, out, "output (default stdout)");
  add_to_flag(flags, to, "jsonl|csv|infinitehbd|oobleck (default: OUT's extension, else jsonl)");
  add_int_flag(flags, "--nodes", "N", "fleet size to generate (default: the source's fleet)",
               "--nodes: expected an integer >= 1", 1, 10'000'000, nodes);
  flags.add({"--days", "D", "", "length in days (default: the source's window)",
             checked("--days: expected a number in (0, 100000]", [&days](const std::string& v) {
               return to_double(v, &days) && days > 0 && days <= 1e5;
             })});
  add_int_flag(flags, "--seed", "S", "random seed (default 1)", "--seed: expected an integer >= 0",
               0, 1LL << 62, seed);
  add_input_flags(flags, in);
  flags.positional(into({&in.path}));
  if (const int rc = flags.parse(args); rc >= 0) return rc;
  if (in.path.empty()) return usage("generate: expected FILE");
  if (to == Format::kAuto) to = format_from_extension(out);
  if (to == Format::kAuto) to = Format::kJsonl;
  Trace t;
  int code = 0;
  if (!read_input(in, &t, &code)) return code;
  t.sort_by_time();
  const TraceFit f = fit_trace(t, {});
  GenerateOptions go;
  go.nodes = static_cast<int>(nodes);
  go.days = days;
  go.seed = static_cast<std::uint64_t>(seed);
  const Trace g = generate_trace(f, go);
  const WriteResult w = write_trace(g, to);
  std::string err;
  if (!write_text_file(out, w.text, &err)) {
    std::fprintf(stderr, "faultline: %s\n", err.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int trace_command(const std::vector<std::string>& args) {
  if (args.empty() || cli::is_help(args[0]) || args[0] == "help") {
    std::fputs(kTraceHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (args[0] == "stats") return stats(rest);
    if (args[0] == "fit") return fit(rest);
    if (args[0] == "convert") return convert(rest);
    if (args[0] == "mix") return mix(rest);
    if (args[0] == "generate") return generate(rest);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultline: trace %s: %s\n", args[0].c_str(), e.what());
    return 1;
  }
  return usage("unknown trace command '" + args[0] + "'");
}

}  // namespace faultline::traces
