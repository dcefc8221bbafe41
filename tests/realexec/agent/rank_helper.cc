// A tiny stand-in for a training rank, probe program and training job in the agent's
// tests (no shell anywhere). The first argument picks what it does:
//   sleep                  print "ready" on stdout, then sleep in helper_sleep_forever()
//   report N CODE          N step reports on $FAULTLINE_REPORT_FD, an error on stderr, a
//                          fatal report (unless FAULTLINE_TEST_NO_FATAL), then exit CODE
//   env                    one report with the launch environment, then sleep
//   junk                   malformed and over-long report lines, one good report, one
//                          with a bare NaN (as Python writes it)
//   take                   a job that reads the fault file: "started" with the kinds it takes
//                          ($FAULTLINE_TEST_FAULTS, comma-separated; "-": no "faults" key),
//                          then every 20 ms acknowledges each id= directive of a kind in
//                          $FAULTLINE_TEST_TAKE (default: every kind) and consumes the one-shot
//                          ones; with $FAULTLINE_TEST_BAD_ACKS first an ack of an unknown id
//                          and an ack of a malformed id
//   --probe KIND ...       the training job's probe mode: a JSON line with a hash
//                          (hangs when FAULTLINE_TEST_HANG=1)
//   --replay --steps K     the replay mode: {"hash":..., "from_step":...}
//   gemm|nccl ...          faultline-probe on a machine without GPU: exit 3
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flag_table.h"

namespace {

int report_fd() {
  const char* v = std::getenv("FAULTLINE_REPORT_FD");
  return v ? std::atoi(v) : -1;
}

void report(const std::string& line) {
  int fd = report_fd();
  if (fd < 0) return;
  std::string l = line + "\n";
  ssize_t w = ::write(fd, l.data(), l.size());
  (void)w;
}

std::string env(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}

__attribute__((noinline)) void helper_sleep_forever() {
  for (;;) ::sleep(100);
}

// The training job's probe and replay modes, with the options the agent gives them
// (realexec/agent/agent_probes.cc): a JSON line with a hash.
int trainjob_mode(int argc, char** argv) {
  std::string probe, seed = "0", steps = "0", deadline_ms;
  bool replay = false;
  faultline::cli::FlagTable t("rank_helper",
                              "rank_helper --probe KIND [--seed S] [--steps K] [--deadline-ms MS]\n"
                              "       rank_helper --replay --steps K [--seed S]");
  t.text("--probe", "KIND", "the probe mode: bitwise or allgather", &probe)
      .toggle("--replay", "the replay mode", &replay)
      .text("--seed", "S", "the seed", &seed)
      .text("--steps", "K", "the steps", &steps)
      .text("--deadline-ms", "MS", "the probe's deadline", &deadline_ms);
  if (const int rc = t.parse({argv + 1, argv + argc}); rc >= 0) return rc;
  if (replay) {
    std::printf("{\"hash\":\"r-%s\",\"from_step\":40,\"rank\":%s}\n", steps.c_str(),
                env("RANK").c_str());
    return 0;
  }
  if (env("FAULTLINE_TEST_HANG") == "1") helper_sleep_forever();
  std::printf(
      "progress "
      "line\n{\"hash\":\"h-%s-%s\",\"kind\":\"%s\",\"fault_file\":\"%s\",\"seconds\":0.25}\n",
      seed.c_str(), steps.c_str(), probe.c_str(), env("FAULTLINE_FAULT_FILE").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sleep") {
    std::printf("ready\n");
    std::fflush(stdout);
    helper_sleep_forever();
  }
  if (mode == "report" && argc >= 4) {
    int n = std::atoi(argv[2]);
    for (int i = 0; i < n; ++i) {
      report("{\"type\":\"step\",\"step\":" + std::to_string(i) + ",\"rank\":" + env("RANK") + "}");
    }
    std::fprintf(stderr, "loading shard 3\n");
    std::fprintf(stderr, "RuntimeError: CUDA error: an illegal memory access was encountered\n");
    std::fprintf(stderr, "cleaning up\n");
    if (std::getenv("FAULTLINE_TEST_NO_FATAL") == nullptr) {
      report("{\"type\":\"fatal\",\"signature\":\"CUDA error: illegal memory access\"}");
    }
    return std::atoi(argv[3]);
  }
  if (mode == "flood" && argc >= 3) {
    // A training loop that reports every step of a very fast loop, then idles.
    const int n = std::atoi(argv[2]);
    for (int i = 0; i < n; ++i)
      report("{\"type\":\"step\",\"step\":" + std::to_string(i) + ",\"rank\":" + env("RANK") +
             ",\"step_time_s\":0.00001}");
    report("{\"type\":\"checkpoint\",\"step\":" + std::to_string(n - 1) +
           ",\"rank\":" + env("RANK") + "}");
    helper_sleep_forever();
  }
  if (mode == "env") {
    std::string j = "{\"type\":\"env\"";
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                          "FAULTLINE_HOST_ADDR", "FAULTLINE_CKPT_DIR", "FAULTLINE_CKPT_EVERY",
                          "FAULTLINE_FAULT_FILE", "FAULTLINE_REPORT_FD", "FAULTLINE_TEST_EXTRA"}) {
      j += std::string(",\"") + k + "\":\"" + env(k) + "\"";
    }
    report(j + "}");
    helper_sleep_forever();
  }
  if (mode == "junk") {
    report("not json");
    report("[1,2,3]");
    report("{\"big\":\"" + std::string(5000, 'x') + "\"}");
    report("{\"type\": 5}");                                       // killed the agent once
    report("{\"type\":\"step\",\"step\":1,\"loss_nan\":\"no\"}");  // a flag of the wrong type
    report("{\"type\":\"step\",\"step\":1}");
    report("{\"type\": \"step\", \"step\": 2, \"loss\": NaN}");  // Python's json.dumps of a NaN
    return 0;
  }
  if (mode == "take") {
    const std::string kinds = std::getenv("FAULTLINE_TEST_FAULTS") ? env("FAULTLINE_TEST_FAULTS")
                                                                   : "crash,hang,nan,slow,sdc";
    const std::string take =
        std::getenv("FAULTLINE_TEST_TAKE") ? env("FAULTLINE_TEST_TAKE") : "crash,hang,nan,slow,sdc";
    std::string started = "{\"type\":\"started\",\"step\":0,\"rank\":" + env("RANK");
    if (kinds != "-") {
      std::string list;
      std::stringstream ks(kinds);
      for (std::string k; std::getline(ks, k, ',');)
        list += (list.empty() ? "\"" : ",\"") + k + "\"";
      started += ",\"faults\":[" + list + "]";
    }
    report(started + "}");
    if (std::getenv("FAULTLINE_TEST_BAD_ACKS")) {
      report("{\"type\":\"fault\",\"rank\":" + env("RANK") +
             ",\"id\":\"0123456789abcdef\",\"fault\":\"nan\"}");
      report("{\"type\":\"fault\",\"rank\":" + env("RANK") +
             ",\"id\":\"../etc\",\"fault\":\"nan\"}");
    }
    const std::string path = env("FAULTLINE_FAULT_FILE");
    std::set<std::string> acked;
    for (;;) {
      std::ifstream in(path);
      std::string kept;
      std::vector<std::string> acks;  // sent once the file no longer holds what was consumed
      bool consumed = false;
      for (std::string line; std::getline(in, line);) {
        std::stringstream ls(line);
        std::string id;
        std::string kind;
        ls >> id >> kind;
        std::string target = "local_rank=0";
        if (kind.rfind("local_rank=", 0) == 0) {
          target = kind;
          ls >> kind;
        }
        const bool mine = id.rfind("id=", 0) == 0 && target == "local_rank=" + env("LOCAL_RANK") &&
                          ("," + take + ",").find("," + kind + ",") != std::string::npos;
        if (mine && acked.insert(id).second)
          acks.push_back("{\"type\":\"fault\",\"rank\":" + env("RANK") + ",\"id\":\"" +
                         id.substr(3) + "\",\"fault\":\"" + kind + "\"}");
        if (mine && kind != "slow" && kind != "sdc") {
          consumed = true;
          continue;
        }
        kept += line + "\n";
      }
      if (consumed) std::ofstream(path, std::ios::trunc) << kept;
      for (const std::string& a : acks) report(a);
      ::usleep(20000);
    }
  }
  if (mode.rfind("--", 0) == 0) return trainjob_mode(argc, argv);
  if (mode == "gemm" || mode == "nccl") {
    std::printf("{\"schema\":1,\"probe\":\"%s\",\"verdict\":\"no_gpu\",\"exit_code\":3}\n",
                mode.c_str());
    return 3;
  }
  std::fprintf(stderr, "rank_helper: unknown mode '%s'\n", mode.c_str());
  return 2;
}
