// faultline-mpi: spreads a sweep's (point, replica) pairs over MPI ranks and gathers
// the results on rank 0. Started by `faultline sim sweep ... --mpi` (which execs it under
// mpirun) as `faultline-mpi FAULTLINE_BINARY sim sweep ARGS...`.
//
// Why a separate executable: libsimgrid exports MPI symbols of its own (SMPI), so a
// process that links both SimGrid and Open MPI depends on link order to get the right
// MPI_Init; and forking simulation processes from an MPI process is fragile. This
// driver links MPI and not SimGrid, and runs the faultline binary for every piece of
// work (posix_spawn), so no process ever holds both.
//
// Byte-identity with a one-machine run holds by construction: rank 0 asks
// `faultline ... --plan` for the pending work, every rank computes its contiguous share
// of the (point, replica) pairs with `faultline ... --work` into a private directory,
// rank 0 writes the gathered chunk files into --out DIR and runs the ordinary one-machine
// command there, which finds every replica computed and only aggregates. A replica's
// result does not depend on which process computed it (sim/sweep.h).
#include <fcntl.h>
#include <mpi.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flag_table.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

// Runs `argv` and waits; stdout goes to `out_file` when given. Returns the exit code
// (128 + signal when killed, 127 when it cannot start).
int run(const std::vector<std::string>& argv, const std::string& out_file = "") {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!out_file.empty())
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "faultline-mpi: cannot run %s%s%s: %s\n", cargv[0],
                 out_file.empty() ? "" : " > ", out_file.c_str(), std::strerror(rc));
    return 127;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string make_temp_dir(const char* what) {
  std::string tmpl =
      (fs::temp_directory_path() / (std::string("faultline-mpi-") + what + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) {
    std::fprintf(stderr, "faultline-mpi: mkdtemp: %s\n", std::strerror(errno));
    return "";
  }
  return tmpl;
}

// The sweep's --out DIR, taken out of `args` (faultline sim sweep checked them before it ran
// this program).
std::string take_out(std::vector<std::string>* args) {
  std::string out;
  faultline::cli::FlagTable("faultline-mpi", "faultline-mpi FAULTLINE_BINARY sim sweep ARGS...")
      .text("--out", "DIR", "the sweep's output directory", &out)
      .extract(args);
  return out;
}

// The sweep arguments with --out replaced by `dir` and `extra` appended.
std::vector<std::string> with_out(const std::vector<std::string>& args, const std::string& dir,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> out = args;
  take_out(&out);
  out.push_back("--out");
  out.push_back(dir);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

void put_u64(std::string& s, std::uint64_t v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Every regular file under dir/points as (relative path, bytes), in a flat blob.
std::string pack_results(const fs::path& dir) {
  std::string blob;
  std::error_code ec;
  if (!fs::exists(dir / "points")) return blob;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir / "points", ec))
    if (e.is_regular_file() && e.path().filename().string().find(".tmp-") == std::string::npos)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string rel = fs::relative(f, dir).string();
    const std::string bytes = slurp(f);
    put_u64(blob, rel.size());
    blob += rel;
    put_u64(blob, bytes.size());
    blob += bytes;
  }
  return blob;
}

bool unpack_results(const std::string& blob, const fs::path& dir) {
  size_t at = 0;
  auto get_u64 = [&](std::uint64_t* v) {
    if (blob.size() - at < 8) return false;
    std::memcpy(v, blob.data() + at, 8);
    at += 8;
    return true;
  };
  while (at < blob.size()) {
    std::uint64_t n = 0, m = 0;
    if (!get_u64(&n) || blob.size() - at < n) return false;
    const std::string rel = blob.substr(at, n);
    at += n;
    if (!get_u64(&m) || blob.size() - at < m) return false;
    if (rel.find("..") != std::string::npos || rel.empty() || rel[0] == '/') return false;
    const fs::path target = dir / rel;
    fs::create_directories(target.parent_path());
    const fs::path tmp = target.string() + ".tmp-mpi";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(blob.data() + at, static_cast<std::streamsize>(m));
      if (!f) return false;
    }
    fs::rename(tmp, target);
    at += m;
  }
  return true;
}

constexpr int kTagBlob = 7;
constexpr std::uint64_t kPiece = 1u << 30;  // MPI counts are int

void send_blob(const std::string& blob, int to) {
  for (std::uint64_t at = 0; at < blob.size(); at += kPiece) {
    const int n = static_cast<int>(std::min<std::uint64_t>(kPiece, blob.size() - at));
    MPI_Send(blob.data() + at, n, MPI_BYTE, to, kTagBlob, MPI_COMM_WORLD);
  }
}

std::string recv_blob(std::uint64_t size, int from) {
  std::string blob(size, '\0');
  for (std::uint64_t at = 0; at < size; at += kPiece) {
    const int n = static_cast<int>(std::min<std::uint64_t>(kPiece, size - at));
    MPI_Recv(blob.data() + at, n, MPI_BYTE, from, kTagBlob, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return blob;
}

// What a rank knows of the run: the faultline binary and the sweep's arguments, --out DIR,
// its rank and the number of ranks.
struct Ranks {
  std::string faultline;
  std::vector<std::string> args;  // "sim", "sweep", ...
  std::string out_dir;            // on rank 0, temp_out when no --out is given
  std::string temp_out;           // rank 0's store when no --out is given
  int rank = 0, size = 1;
};

// The faultline command line: the sweep's arguments with --out `dir` and `extra`.
std::vector<std::string> command(const Ranks& m, const std::string& dir,
                                 const std::vector<std::string>& extra) {
  std::vector<std::string> cmd{m.faultline};
  for (const auto& a : with_out(m.args, dir, extra)) cmd.push_back(a);
  return cmd;
}

// Step 1, on rank 0: makes the store (a temporary one without --out) and asks
// `faultline ... --plan` for the (point, replica) pairs not computed yet, into `plan_text`.
// Returns 0, or the exit code to stop with.
int plan_on_rank0(Ranks& m, std::string& plan_text) {
  if (m.out_dir.empty()) {
    m.temp_out = make_temp_dir("out");
    m.out_dir = m.temp_out;
    if (m.out_dir.empty()) return 1;
  }
  std::error_code ec;
  if (!fs::create_directories(m.out_dir, ec) && ec) {
    std::fprintf(stderr, "faultline-mpi: %s: %s\n", m.out_dir.c_str(), ec.message().c_str());
    return 1;
  }
  const std::string plan_file = m.out_dir + "/.mpi-plan.json";
  const int rc = run(command(m, m.out_dir, {"--plan"}), plan_file);
  plan_text = slurp(plan_file);
  fs::remove(plan_file);
  return rc;
}

// Sends rank 0's `text` to every rank.
void broadcast(std::string& text) {
  std::uint64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  text.resize(size);
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD);
}

// Step 2: this rank's contiguous share of the plan's pending (point, replica) pairs, in
// plan order, as --work items "P:A:B,...". False when the plan is unreadable (rank 0 says
// so).
bool my_items(const std::string& plan_text, const Ranks& m, std::string& items) {
  struct Pair {
    int point, replica;
  };
  std::vector<Pair> pairs;
  try {
    const auto plan = nlohmann::json::parse(plan_text);
    for (const auto& p : plan["points"])
      for (const auto& r : p["pending"])
        for (int x = r[0].get<int>(); x < r[1].get<int>(); ++x)
          pairs.push_back({p["index"].get<int>(), x});
  } catch (const std::exception& e) {
    if (m.rank == 0) std::fprintf(stderr, "faultline-mpi: bad plan: %s\n", e.what());
    return false;
  }
  const size_t lo = pairs.size() * m.rank / m.size, hi = pairs.size() * (m.rank + 1) / m.size;
  for (size_t i = lo; i < hi;) {
    size_t j = i;
    while (j + 1 < hi && pairs[j + 1].point == pairs[i].point &&
           pairs[j + 1].replica == pairs[j].replica + 1)
      ++j;
    items += (items.empty() ? "" : ",") + std::to_string(pairs[i].point) + ":" +
             std::to_string(pairs[i].replica) + ":" + std::to_string(pairs[j].replica + 1);
    i = j + 1;
  }
  return true;
}

// Step 2: computes `items` (none: nothing to do) with `faultline ... --work` in a private
// directory and packs the result files into `blob`. Returns the exit status (0: done).
int compute(const Ranks& m, const std::string& items, std::string& blob) {
  if (items.empty()) return 0;
  int status = 0;
  const std::string mine = make_temp_dir("rank");
  if (mine.empty()) {
    status = 1;
  } else {
    status = run(command(m, mine, {"--quiet", "--work", items}));
    if (status == 0) blob = pack_results(mine);
    fs::remove_all(mine);
  }
  if (status != 0)
    std::fprintf(stderr, "faultline-mpi: rank %d: work %s failed (exit %d)\n", m.rank,
                 items.c_str(), status);
  return status;
}

// Step 3, on rank 0: receives every other rank's files (`meta`: each rank's status and
// blob size; rank 0's own blob is `blob`) and unpacks them into --out DIR. Whether every
// rank's work succeeded and its files were readable.
bool receive_all(const Ranks& m, const std::vector<std::uint64_t>& meta, const std::string& blob) {
  bool ok = true;
  for (int r = 0; r < m.size; ++r) {
    const std::string b =
        r == 0 ? blob : (meta[2 * r + 1] ? recv_blob(meta[2 * r + 1], r) : std::string());
    if (meta[2 * r] != 0) ok = false;
    if (!unpack_results(b, m.out_dir)) {
      std::fprintf(stderr, "faultline-mpi: bad result files from rank %d\n", r);
      ok = false;
    }
  }
  return ok;
}

// Removes rank 0's temporary store, ends MPI and returns `rc`.
int finish(const Ranks& m, int rc) {
  if (!m.temp_out.empty()) fs::remove_all(m.temp_out);
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Ranks m;
  MPI_Comm_rank(MPI_COMM_WORLD, &m.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m.size);
  if (argc < 4) {
    if (m.rank == 0)
      std::fprintf(
          stderr,
          "usage: mpirun -n K faultline sim sweep SCENARIO.json ... --mpi\n"
          "       (faultline-mpi FAULTLINE_BINARY sim sweep ARGS... is how faultline runs it)\n");
    MPI_Finalize();
    return 2;
  }
  m.faultline = argv[1];
  m.args.assign(argv + 2, argv + argc);
  std::vector<std::string> without_out = m.args;
  m.out_dir = take_out(&without_out);

  // 1. Rank 0 plans: which (point, replica) pairs are not computed yet.
  std::string plan_text;
  int rc = m.rank == 0 ? plan_on_rank0(m, plan_text) : 0;
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc != 0) return finish(m, rc);
  broadcast(plan_text);

  // 2. Every rank computes its contiguous share of the pending pairs, in plan order.
  std::string items;
  if (!my_items(plan_text, m, items)) {
    MPI_Finalize();  // (rank 0's temporary store, if any, is left behind)
    return 1;
  }
  std::string blob;
  const int status = compute(m, items, blob);

  // 3. Gather on rank 0: every rank's status and files.
  std::uint64_t mine_meta[2] = {static_cast<std::uint64_t>(status), blob.size()};
  std::vector<std::uint64_t> meta(2 * m.size);
  MPI_Gather(mine_meta, 2, MPI_UINT64_T, meta.data(), 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (m.rank != 0) {
    if (!blob.empty()) send_blob(blob, 0);
    MPI_Finalize();
    return status == 0 ? 0 : 1;
  }

  // 4. Rank 0 aggregates with the one-machine command: nothing is left to compute.
  if (receive_all(m, meta, blob)) {
    rc = run(command(m, m.out_dir, {"--quiet"}));
  } else {
    std::fprintf(stderr,
                 "faultline-mpi: some work failed; finished work is kept in %s, rerun to resume\n",
                 m.temp_out.empty() ? m.out_dir.c_str()
                                    : "a temporary directory (use --out DIR to keep it)");
    rc = 1;
  }
  return finish(m, rc);
}
