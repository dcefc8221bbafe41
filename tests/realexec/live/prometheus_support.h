// The real Prometheus for the live end-to-end tests: a free loopback port, plain HTTP on
// loopback, the instant query API, and a prometheus process of the test's own.
#pragma once

#include <sys/socket.h>

#include "tests/realexec/live/live_cluster.h"
#include "tests/support/free_port.h"

namespace faultline::live_e2e {

namespace metrics_e2e {

using faultline::testing::free_port;

// One HTTP/1.0 exchange on loopback: the whole response (status line, headers, body), "" when
// the connection fails.
inline std::string http(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

inline std::string body_of(const std::string& response) {
  const std::size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

inline std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '_' || ch == '.' || ch == '-') {
      out += static_cast<char>(ch);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", ch);
      out += hex;
    }
  }
  return out;
}

// Prometheus's instant query API: the result vector (empty on any failure).
inline json prom_query(int port, const std::string& promql) {
  const json r = json::parse(body_of(http(port, "GET /api/v1/query?query=" + url_encode(promql) +
                                                    " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")),
                             nullptr, false);
  if (r.is_discarded() || r.value("status", "") != "success") return json::array();
  return r["data"]["result"];
}

// The value of a one-sample result as Prometheus printed it (Go's shortest round-trip form).
inline double sample_value(const json& result) {
  return std::stod(result.at(0).at("value").at(1).get<std::string>());
}

inline std::string find_prometheus() {
  FILE* p = popen("command -v prometheus 2>/dev/null", "r");
  char buf[512] = {0};
  const bool got = p && fgets(buf, sizeof buf, p) != nullptr;
  if (p) pclose(p);
  std::string path = got ? buf : "";
  while (!path.empty() && path.back() == '\n') path.pop_back();
  return path;
}

// A prometheus process of the test's own, killed (with its group) at scope exit.
struct Prometheus {
  pid_t pid = -1;
  // Starts `binary` with its config, data and log in `dir`: every second it scrapes
  // 127.0.0.1:`metrics_port` with the bearer token in `token_file`; its API is on `api_port`.
  void start(const std::string& binary, const std::string& dir, int metrics_port,
             const std::string& token_file, int api_port) {
    std::ofstream(dir + "/prometheus.yml")
        << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
           "scrape_configs:\n"
           "  - job_name: faultline\n"
           "    scrape_interval: 1s\n"
           "    scrape_timeout: 1s\n"
           "    authorization: {type: Bearer, credentials_file: "
        << token_file << "}\n    static_configs: [{targets: ['127.0.0.1:" << metrics_port
        << "']}]\n";
    pid = spawn({binary, "--config.file=" + dir + "/prometheus.yml",
                 "--storage.tsdb.path=" + dir + "/prometheus-data",
                 "--web.listen-address=127.0.0.1:" + std::to_string(api_port)},
                dir + "/prometheus.log");
  }
  ~Prometheus() {
    if (pid > 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace metrics_e2e

}  // namespace faultline::live_e2e
