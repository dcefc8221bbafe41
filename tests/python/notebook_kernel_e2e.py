"""faultline under a notebook kernel: a real IPython kernel (ipykernel, as Jupyter runs it,
driven by jupyter_client, as a notebook server drives it) imports faultline, loads the
Python example localizer and simulates with forked replicas. The kernel's own threads
(heartbeat, I/O) run throughout; the results must equal the faultline program's for the
same seed, whatever the parallelism, and the kernel must answer a later cell.

usage: notebook_kernel_e2e.py --faultline BIN --pythonpath DIR"""

import argparse
import json
import os
import queue
import subprocess
import sys
from pathlib import Path

from jupyter_client import KernelManager

ROOT = Path(__file__).resolve().parents[2]
DENSE = str(ROOT / "scenarios" / "byterobust-dense-9600.json")
PLUGIN = str(ROOT / "examples" / "py-localizer" / "pp_group_replay.py")
SETS = {"faults.categories.nan.rate_per_machine_day": 0.0001,
        "faults.categories.nan.recall.bitwise": 0.2,
        "policy.params.localization": "pp-group-replay"}

CELL = """
import faultline
faultline.load_plugin(%(plugin)r)
kw = dict(replicas=6, seed=5, set=%(sets)r)
one = faultline.simulate(%(dense)r, jobs=1, **kw)
two = faultline.simulate(%(dense)r, jobs=2, **kw)
print("RESULT", repr(one.ettr.mean), repr(two.ettr.mean), one.replicas.equals(two.replicas),
      one.json["policy_modules"]["localization"]["name"])
"""


def run_cell(kc, code, timeout=120):
    """The cell's stdout text; raises on an error reply or a timeout."""
    msg_id = kc.execute(code)
    out = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            raise SystemExit("FAIL: the kernel did not finish the cell within %d s" % timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise SystemExit("FAIL: the cell raised %s: %s\n%s" % (
                content["ename"], content["evalue"], "\n".join(content["traceback"])))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)


def cli_ettr(binary):
    args = [binary, "sim", "run", DENSE, "--plugin", PLUGIN, "--replicas", "6", "--seed", "5",
            "--format", "json", "--quiet"]
    for k, v in SETS.items():
        args += ["--set", "%s=%s" % (k, json.dumps(v))]
    return json.loads(subprocess.run(args, check=True, capture_output=True,
                                     text=True).stdout)["ettr"]["mean"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--pythonpath", required=True)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=a.pythonpath, PYTHONDONTWRITEBYTECODE="1",
               PYDEVD_DISABLE_FILE_VALIDATION="1")
    km = KernelManager(kernel_name="python3")
    km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    km.start_kernel(env=env)
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        text = run_cell(kc, CELL % {"plugin": PLUGIN, "sets": SETS, "dense": DENSE})
        line = [x for x in text.splitlines() if x.startswith("RESULT ")]
        if not line:
            raise SystemExit("FAIL: no RESULT line in the cell's output:\n" + text)
        _, one, two, same, name = line[0].split()
        want = repr(cli_ettr(a.faultline))
        print("kernel: ETTR jobs=1 %s, jobs=2 %s, replicas equal %s, localizer %s; CLI %s"
              % (one, two, same, name, want))
        if not (one == two == want and same == "True" and name == "pp-group-replay"):
            raise SystemExit("FAIL: the kernel's results differ from the CLI's")
        if run_cell(kc, "print(6 * 7)").strip() != "42":
            raise SystemExit("FAIL: the kernel does not answer a later cell")
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
    print("notebook kernel e2e: ok")


if __name__ == "__main__":
    main()
