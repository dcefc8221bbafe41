#include "sim/network.h"

#include <algorithm>
#include <boost/graph/adjacency_iterator.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u.hpp>

#include "policies/api/time.h"

namespace faultline::sim {

namespace sg4 = simgrid::s4u;

namespace {
// Finds the neighbour of `v` of the given kind and the edge to it (first one).
bool up(const TopologyGraph& g, TopoVertex v, NodeKind kind, TopoVertex* out, TopoLink* link,
        double* total_bw) {
  bool found = false;
  *total_bw = 0;
  for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
    TopoVertex t = boost::target(*e, g);
    if (g[t].kind != kind) continue;
    if (!found) {
      *out = t;
      *link = g[*e];
      found = true;
    }
    *total_bw += g[*e].bandwidth_bps;
  }
  return found;
}
}  // namespace

Platform::Platform(const ClusterView& view, int) {
  const auto t0 = std::chrono::steady_clock::now();
  static int argc = 2;
  static char arg0[] = "faultline";
  static char arg1[] = "--log=root.thres:critical";
  static char* argv[] = {arg0, arg1, nullptr};
  engine_ = std::make_unique<sg4::Engine>(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");  // max-min fair sharing, no TCP-gamma tweaks
  // Actors here are tiny (a driver and short-lived transfer waiters): small stacks. With
  // a guard page (one page, in pages) SimGrid takes a stack from posix_memalign; without
  // one it took it from calloc, which zeroed 256 KiB on every replica's actor (7% of a
  // replica's instructions, and the L2 cache flushed each time); an overflow now faults
  // instead of corrupting the heap.
  sg4::Engine::set_config("contexts/stack-size:256");
  sg4::Engine::set_config("contexts/guard-size:1");

  const ClusterSpec& spec = view.spec();
  const TopologyGraph& g = view.graph();
  slots_ = spec.machines;
  standbys_ = spec.standby_machines;
  storages_ = spec.storage_hosts;
  auto* zone = sg4::create_star_zone("cluster");
  const double lat = spec.link_latency_us * 1e-6;

  std::map<TopoVertex, sg4::Link*> tor_links, leaf_links;
  std::map<const sg4::Link*, int> link_index;
  // Creates a link and records it for the closed form.
  auto new_link = [&](const std::string& name, double bw, double latency) {
    auto* l = zone->create_link(name, bw)->set_latency(latency)->seal();
    link_index.emplace(l, static_cast<int>(links_.size()));
    links_.push_back({bw, latency});
    return l;
  };
  // Adds a host's route to the centre, to SimGrid and to routes_ (in host index order).
  auto add_route = [&](sg4::Host* h, const std::vector<sg4::Link*>& route) {
    std::vector<sg4::LinkInRoute> in_route;
    std::vector<int> ids;
    for (auto* l : route) {
      in_route.emplace_back(l);
      ids.push_back(link_index.at(l));
    }
    zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, in_route, true);
    routes_.push_back(std::move(ids));
  };
  auto link_for = [&](std::map<TopoVertex, sg4::Link*>& cache, TopoVertex v,
                      const std::string& name, double bw) {
    auto it = cache.find(v);
    if (it != cache.end()) return it->second;
    auto* l = new_link(name, bw, lat);
    cache[v] = l;
    return l;
  };
  auto machine_route = [&](sg4::Host* h, TopoVertex mv, const std::string& name) {
    std::vector<sg4::Link*> route;
    TopoVertex tor, leaf, spine;
    TopoLink nic, tor_up, leaf_up;
    double bw = 0;
    up(g, mv, NodeKind::kTor, &tor, &nic, &bw);
    route.push_back(new_link(name + "_nic", nic.bandwidth_bps, lat));
    up(g, tor, NodeKind::kLeaf, &leaf, &tor_up, &bw);
    route.push_back(link_for(tor_links, tor, "tor" + std::to_string(g[tor].index), bw));
    up(g, leaf, NodeKind::kSpine, &spine, &leaf_up, &bw);
    route.push_back(link_for(leaf_links, leaf, "leaf" + std::to_string(g[leaf].index), bw));
    add_route(h, route);
  };

  for (int s = 0; s < slots_; ++s) {
    auto* h = zone->create_host("m" + std::to_string(s), 1e12)->seal();
    machine_route(h, view.machine_vertex(s), "m" + std::to_string(s));
    hosts_.push_back(h);
  }
  // Standby machines sit in extra racks of their own; they share the job's first
  // leaf uplink (they are parked near the job).
  for (int i = 0; i < standbys_; ++i) {
    const std::string name = "standby" + std::to_string(i);
    auto* h = zone->create_host(name, 1e12)->seal();
    std::vector<sg4::Link*> route{new_link(name + "_nic", spec.nic_gbps * 1e9 / 8, lat)};
    if (!leaf_links.empty()) route.push_back(leaf_links.begin()->second);
    add_route(h, route);
    hosts_.push_back(h);
  }
  int si = 0;
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    if (g[*v].kind != NodeKind::kStorage) continue;
    const std::string name = "storage" + std::to_string(si++);
    auto* h = zone->create_host(name, 1e12)->seal();
    TopoVertex spine;
    TopoLink link;
    double bw = 0;
    up(g, *v, NodeKind::kSpine, &spine, &link, &bw);
    add_route(h, {new_link(name + "_link", bw, lat)});
    hosts_.push_back(h);
  }
  control_ = zone->create_host("control", 1e12)->seal();
  zone->add_route(control_->get_netpoint(), nullptr, nullptr, nullptr,
                  {sg4::LinkInRoute(zone->create_link("control_link", 1e12)->seal())}, true);
  zone->seal();
  build_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Platform::~Platform() = default;

FlowNet::Key FlowNet::key_of(const std::vector<Transfer>& batch) {
  // Two independent 64-bit hashes of the exact transfer list (a collision would need
  // both to collide); cheap enough to compute for a 25k-transfer batch on every use.
  auto mix = [](std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  Key k{batch.size(), 0x243F6A8885A308D3ull, 0x13198A2E03707344ull};
  for (const auto& t : batch) {
    std::uint64_t bytes;
    std::memcpy(&bytes, &t.bytes, sizeof bytes);
    const std::uint64_t v = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.src)) << 32) ^
                            static_cast<std::uint32_t>(t.dst);
    k.h1 = mix(k.h1 ^ v) + bytes;
    k.h2 = mix(k.h2 + bytes) ^ (v * 0xD6E8FEB86659FD93ull);
  }
  return k;
}

const std::int64_t* DurationMemo::find(const BatchKey& key) const {
  if (cells_.empty() || key.n == 0) return nullptr;
  const std::size_t mask = cells_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(key.h1) & mask;; i = (i + 1) & mask) {
    const Cell& c = cells_[i];
    if (c.key.n == 0) return nullptr;
    if (c.key == key) return &c.duration;
  }
}

void DurationMemo::insert(const BatchKey& key, std::int64_t d) {
  if (key.n == 0 || find(key)) return;
  if (2 * (size_ + 1) > cells_.size()) {
    std::vector<Cell> old = std::move(cells_);
    cells_.assign(std::max<std::size_t>(64, old.size() * 2), Cell{});
    size_ = 0;
    for (const Cell& c : old)
      if (c.key.n != 0) insert(c.key, c.duration);
  }
  const std::size_t mask = cells_.size() - 1;
  std::size_t i = static_cast<std::size_t>(key.h1) & mask;
  while (cells_[i].key.n != 0) i = (i + 1) & mask;
  cells_[i] = {key, d};
  ++size_;
}

std::int64_t FlowNet::cached(const Key& key) const {
  if (in_flight_ > 0) return -1;
  const std::int64_t* d = memo_.find(key);
  return d ? *d : -1;
}

struct FlowNet::Running {
  std::vector<sg4::CommPtr> comms;
  bool cancelled = false;
};

FlowNet::BatchId FlowNet::start(std::vector<Transfer> batch, const Key& key,
                                std::function<void(std::int64_t)> done) {
  ++real_;
  const bool idle = in_flight_ == 0;
  ++in_flight_;
  const std::uint64_t my_epoch = ++epoch_;
  const BatchId id = ++next_id_;
  auto run = std::make_shared<Running>();
  running_.emplace(id, run);
  sg4::Actor::create(
      "flows", platform_.control_host(),
      [this, batch = std::move(batch), done = std::move(done), idle, my_epoch, key, id, run]() {
        if (run->cancelled) return;  // given up before it began
        const double t0 = sg4::Engine::get_clock();
        run->comms.reserve(batch.size());
        for (const auto& t : batch)
          run->comms.push_back(sg4::Comm::sendto_async(platform_.host(t.src), platform_.host(t.dst),
                                                       static_cast<std::uint64_t>(t.bytes)));
        try {
          sg4::Comm::wait_all(run->comms);
        } catch (const simgrid::Exception&) {
          // Cancelled: cancel() did the bookkeeping.
        }
        if (run->cancelled) return;
        running_.erase(id);
        const std::int64_t d = Duration::round_ns((sg4::Engine::get_clock() - t0) * 1e9);
        --in_flight_;
        // Memoise only what ran alone from start to end.
        if (idle && epoch_ == my_epoch) memo_.insert(key, d);
        done(d);
      });
  return id;
}

void FlowNet::cancel(BatchId id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  const std::shared_ptr<Running> run = it->second;
  running_.erase(it);
  run->cancelled = true;
  --in_flight_;
  for (auto& c : run->comms) c->cancel();
}

namespace {

// A transfer in the fluid model: the links it loads (with their weights), what is left to
// send, its sharing penalty (route latency), its rate bound, when it starts sharing.
struct FluidFlow {
  std::vector<std::pair<int, double>> use;  // link, weight
  double remains, penalty, bound, start;
  bool active = false, done = false;
  double rate = 0;
};

// SimGrid's weighted max-min sharing by progressive filling: the rate of every active,
// unfinished flow, given each link's bandwidth. The scratch vectors (one entry per link)
// come back zeroed; `touched` lists the links the active flows use.
template <class Bandwidth>
void share_links(std::vector<FluidFlow>& flows, const Bandwidth& bandwidth,
                 std::vector<double>& remaining, std::vector<double>& usage,
                 std::vector<char>& saturated, std::vector<int>& touched) {
  touched.clear();
  for (auto& f : flows) {
    if (!f.active || f.done) continue;
    f.rate = -1;
    for (auto [l, w] : f.use) {
      if (usage[l] == 0 && remaining[l] == 0) touched.push_back(l);
      remaining[l] = bandwidth(l);
      usage[l] += w / f.penalty;
    }
  }
  std::size_t unfixed = 0;
  for (auto& f : flows) unfixed += f.active && !f.done;
  while (unfixed > 0) {
    double level = -1;
    for (int l : touched)
      if (usage[l] > 0) {
        const double x = remaining[l] / usage[l];
        if (level < 0 || x < level) level = x;
      }
    double bound_level = -1;
    for (const auto& f : flows)
      if (f.active && !f.done && f.rate < 0 && (level < 0 || f.bound * f.penalty < level))
        bound_level =
            bound_level < 0 ? f.bound * f.penalty : std::min(bound_level, f.bound * f.penalty);
    const bool by_bound = bound_level >= 0;
    if (by_bound) level = bound_level;
    // Fix the transfers on the saturated links (or at their bound).
    if (!by_bound)
      for (int l : touched)
        if (usage[l] > 0 && std::abs(remaining[l] / usage[l] - level) <= 1e-5 * level)
          saturated[l] = 1;
    for (auto& f : flows) {
      if (!f.active || f.done || f.rate >= 0) continue;
      bool fix = false;
      if (by_bound)
        fix = std::abs(f.bound * f.penalty - level) <= 1e-5 * level;
      else
        for (auto [l, w] : f.use) fix |= saturated[l] != 0;
      if (!fix) continue;
      f.rate = by_bound ? f.bound : level / f.penalty;
      for (auto [l, w] : f.use) {
        remaining[l] -= w * f.rate;
        usage[l] -= w / f.penalty;
        if (usage[l] < 1e-12 * w / f.penalty) usage[l] = 0;
      }
      --unfixed;
    }
    if (!by_bound)
      for (int l : touched) saturated[l] = 0;
  }
  for (int l : touched) remaining[l] = usage[l] = 0;
}

}  // namespace

std::int64_t FlowNet::fluid_duration(const std::vector<Transfer>& batch, const Fluid& opt) const {
  std::vector<std::int64_t>* finish = opt.finish;
  // SimGrid's CM02 fluid model, as configured in Platform (see SimGrid 3.32
  // src/surf/network_cm02.cpp and src/kernel/lmm/maxmin.cpp):
  // - a transfer first waits its route's latency (the sum over its links), then shares;
  // - its route is the source's links then the destination's, each link once; it loads
  //   each with weight 1, plus 0.05 for its way back (cross-traffic; the same links);
  // - max-min sharing weighted by the "sharing penalty", the route latency: at a level x
  //   a transfer runs at x / penalty, and a link is full when the sum of weight x rate
  //   reaches its bandwidth;
  // - a rate never exceeds the slowest link of the route nor TCP_gamma / (2 x latency),
  //   TCP_gamma = 4 MiB (SimGrid's default).
  constexpr double kTcpGamma = 4194304.0, kCross = 0.05;
  constexpr double kSurfPrecision = 1e-9;  // SimGrid: events this close happen together
  const auto& L = platform_.links();
  auto bandwidth = [&](int l) {
    if (!opt.degraded) return L[l].bandwidth;
    auto it = opt.degraded->find(l);
    return it == opt.degraded->end() ? L[l].bandwidth : L[l].bandwidth * it->second;
  };
  std::vector<FluidFlow> flows;
  flows.reserve(batch.size());
  for (const auto& t : batch) {
    FluidFlow f;
    double lat = 0, slowest = -1;
    const auto& a = platform_.route(t.src);
    const auto& b = platform_.route(t.dst);
    for (int host : {t.src, t.dst})
      for (int l : platform_.route(host)) {
        // SimGrid's star zone puts a link that both ends cross (a shared ToR or leaf
        // uplink) in the route once; the fabric turns below it.
        if (std::any_of(f.use.begin(), f.use.end(), [&](const auto& u) { return u.first == l; }))
          continue;
        if (opt.turn_at_common_switch && std::find(a.begin(), a.end(), l) != a.end() &&
            std::find(b.begin(), b.end(), l) != b.end())
          continue;
        lat += L[l].latency;
        if (slowest < 0 || bandwidth(l) < slowest) slowest = bandwidth(l);
        f.use.emplace_back(l, 1 + kCross);
      }
    f.remains = t.bytes;
    f.start = lat;
    f.penalty = lat > 0 ? lat : 1.0;
    f.bound = lat > 0 ? std::min(slowest, kTcpGamma / (2 * lat)) : slowest;
    flows.push_back(std::move(f));
  }
  // Progressive filling over the active transfers.
  if (fill_remaining_.size() != L.size()) {
    fill_remaining_.assign(L.size(), 0);
    fill_usage_.assign(L.size(), 0);
    fill_saturated_.assign(L.size(), 0);
  }
  std::vector<int> touched;
  auto solve = [&]() {
    share_links(flows, bandwidth, fill_remaining_, fill_usage_, fill_saturated_, touched);
  };
  double now = 0, last = 0;
  std::size_t left = flows.size();
  if (finish) finish->assign(flows.size(), 0);
  bool changed = true;
  while (left > 0) {
    for (auto& f : flows)
      if (!f.active && !f.done && f.start <= now + kSurfPrecision) {
        f.active = true;
        changed = true;
      }
    if (changed) solve();
    changed = false;
    double next = -1;
    for (const auto& f : flows) {
      double at = -1;
      if (!f.active && !f.done)
        at = f.start;
      else if (f.active && !f.done)
        at = f.rate > 0 ? now + f.remains / f.rate : -1;
      if (at >= 0 && (next < 0 || at < next)) next = at;
    }
    if (next < 0) break;  // nothing can move (no link): SimGrid would not either
    const double dt = next - now;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      FluidFlow& f = flows[i];
      if (!f.active || f.done) continue;
      if (now + f.remains / f.rate <= next + kSurfPrecision) {
        if (finish) (*finish)[i] = Duration::round_ns(next * 1e9);
        f.done = true;
        f.remains = 0;
        --left;
        changed = true;
        last = next;
      } else {
        f.remains -= f.rate * dt;
      }
    }
    now = next;
  }
  return Duration::round_ns(last * 1e9);
}

}  // namespace faultline::sim
