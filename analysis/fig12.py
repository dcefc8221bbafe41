#!/usr/bin/env python3
"""ByteRobust Fig. 12 method, on the simulator: weighted scheduling time of warm standby,
reschedule, requeue and an oracle with unlimited ready spares, over 1..P99 evictions
(Binomial(N, p) weights, 99%) plus a catastrophic 32-machine switch failure (1%).

usage: analysis/fig12.py FAULTLINE_BINARY [SCENARIO]   (default scenarios/recovery-16k.json)
Each point is one `faultline sim run` of the failover-bench stack; the scheduling time is
the failover bucket minus the two process restarts (initial start and the restart after
the eviction)."""
import json, math, os, subprocess, sys

exe = sys.argv[1]
scen = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "scenarios", "recovery-16k.json")
sc = json.load(open(scen))
N, init = sc["cluster"]["machines"], sc["job"]["init_s"]
p, q = 1.2e-3, 0.99

def run(k, mode, pool):
    args = [exe, "sim", "run", scen, "--replicas", "1", "--format", "json", "--set", "faults.categories=[]",
            "--set", "policy.stack=failover-bench", "--set", 'policy.params={"k":%d,"mode":%d}' % (k, mode), "--set", "cluster.standby_machines=%d" % pool,
            "--set", "job.horizon_days=0.2"]
    r = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    return r["breakdown_s"]["failover"] - 2 * init

pmf = lambda k: math.comb(N, k) * p**k * (1 - p)**(N - k)
cdf, p99 = 0.0, 0
while True:
    cdf += pmf(p99)
    if cdf >= q: break
    p99 += 1
ks = list(range(1, p99 + 1))
w = [pmf(k) for k in ks]
w = [x / sum(w) * 0.99 for x in w]
res = {}
for name, mode, pool in [("warm standby", 0, p99), ("reschedule", 1, 0), ("requeue", 2, 0),
                         ("oracle", 0, 100000)]:
    t = [run(k, mode, pool) for k in ks]
    cat = run(32, mode, pool)
    res[name] = sum(a * b for a, b in zip(w, t)) + 0.01 * cat
    print("%-13s per k=1..%d: %s s; 32-machine failure: %.1f s; weighted %.1f s" %
          (name, p99, ", ".join("%.1f" % x for x in t), cat, res[name]))
ws = res["warm standby"]
print("requeue / warm standby   %.2fx (published 10.87x)" % (res["requeue"] / ws))
print("reschedule / warm standby %.2fx (published 5.36x)" % (res["reschedule"] / ws))
print("warm standby vs oracle   +%.2f%% (published 5.19%%)" % (100 * (ws / res["oracle"] - 1)))
