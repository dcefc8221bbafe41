#!/usr/bin/env python3
"""Every subcommand of every program answers --help with exit 0, and its --help lists every
option of its flag table (cli/flag_table.h; FAULTLINE_LIST_FLAGS=1 makes a table print its
options' names instead of parsing).

usage: flag_help_test.py --faultline BIN [--trainjob BIN] [--live BIN] [--probe BIN]
"""
import argparse
import os
import subprocess
import sys

# Every command path of `faultline` that parses options through a flag table.
FAULTLINE = [
    ["sim", "run"], ["sim", "compare"], ["sim", "sweep"], ["sim", "tune"], ["sim", "replay"],
    ["sim", "schema"], ["policies"], ["report"],
    ["analyze", "daly"], ["analyze", "young"], ["analyze", "meta-ettr"], ["analyze", "standby"],
    ["analyze", "localize"], ["analyze", "check"],
    ["trace", "stats"], ["trace", "fit"], ["trace", "convert"], ["trace", "mix"],
    ["trace", "generate"],
]
# Dispatchers: --help exits 0 and names each of their subcommands.
DISPATCHERS = {(): ["sim", "analyze", "report", "policies", "trace"],
               ("sim",): ["run", "compare", "sweep", "tune", "replay", "schema"],
               ("analyze",): ["daly", "young", "meta-ettr", "standby", "localize", "check"],
               ("trace",): ["stats", "fit", "convert", "mix", "generate"]}
# faultline-live: its commands, and the operator commands of `live`.
LIVE_COMMANDS = ["live", "agent", "fleet"]
LIVE = ["run", "inject", "update", "status", "stop", "launch", "slurm-config"]
# faultline-probe: one command per probe.
PROBES = ["gemm", "hbm", "pcie", "p2p", "nccl", "env"]


def run(argv, list_flags=False):
    env = dict(os.environ)
    env.pop("FAULTLINE_LIST_FLAGS", None)
    if list_flags:
        env["FAULTLINE_LIST_FLAGS"] = "1"
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--trainjob", help="faultline-trainjob, a program of one command")
    ap.add_argument("--live", help="faultline-live")
    ap.add_argument("--probe", help="faultline-probe")
    a = ap.parse_args()
    bad = []
    commands = [[a.faultline, *path] for path in FAULTLINE]
    dispatchers = [([a.faultline, *path], subs) for path, subs in DISPATCHERS.items()]
    if a.trainjob:
        commands.append([a.trainjob])
    if a.live:
        commands += [[a.live, "agent"], [a.live, "fleet"]] + [[a.live, "live", c] for c in LIVE]
        dispatchers += [([a.live], LIVE_COMMANDS), ([a.live, "live"], LIVE)]
    if a.probe:
        commands += [[a.probe, p] for p in PROBES]
        dispatchers.append(([a.probe], PROBES))
    for argv, subs in dispatchers:
        cmd = " ".join([os.path.basename(argv[0])] + argv[1:])
        r = run([*argv, "--help"])
        if r.returncode != 0:
            bad.append("%s --help: exit %d" % (cmd, r.returncode))
        bad += ["%s --help: does not name %s" % (cmd, s) for s in subs if s not in r.stdout]
    for argv in commands:
        cmd = " ".join([os.path.basename(argv[0])] + argv[1:])
        h = run([*argv, "--help"])
        if h.returncode != 0:
            bad.append("%s --help: exit %d: %s" % (cmd, h.returncode, h.stderr.strip()))
            continue
        names = run([*argv, "--help"], list_flags=True)
        if names.returncode != 0:
            bad.append("%s: the table's options: exit %d" % (cmd, names.returncode))
            continue
        flags = names.stdout.split()
        bad += ["%s --help: does not list %s" % (cmd, f)
                for f in flags if f not in h.stdout]
        print("%-28s %2d options, all in --help" % (cmd, len(flags)))
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
