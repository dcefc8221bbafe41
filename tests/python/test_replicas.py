"""faultline.replicas: the quorum file's parsing and validation, the step-boundary and
state-transfer rules, and replica groups in one process (gloo groups of 1 and 2, the second
one's members in two threads) over a TCPStore hosted by the test, as the controller would."""

import datetime
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import torch
import torch.distributed as dist

from faultline.replicas import (DEFAULT_TIMEOUT_S, Evicted, Quorum, QuorumError, QuorumFile,
                                QuorumFileError, ReplicaGroup, StoreHost, check_member,
                                parse_quorum, pick_source, quorum_mac, switch_target)

PATH = "/run/job/quorum.json"


def faultline_kinds():
    from faultline.faults import KINDS
    return KINDS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
GOOD = {"quorum": 3, "members": [0, 2, 5], "store": "10.0.0.1:29400", "join": [5]}


def text(**changes):
    obj = dict(GOOD)
    for k, v in changes.items():
        if v is None:
            obj.pop(k)
        else:
            obj[k] = v
    return json.dumps(obj)


def make_model(seed=3):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def compute_fn(model, optimizer, replica):
    def compute(step):
        g = torch.Generator().manual_seed(1000 * step + replica)
        x = torch.randn(16, 4, generator=g)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        loss.backward()
        return loss
    return compute


class ParseTest(unittest.TestCase):
    def assertBad(self, body, *words):
        with self.assertRaises(QuorumFileError) as cm:
            parse_quorum(body, PATH)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertIn(PATH, msg)
        for w in words:
            self.assertIn(w, msg)

    def test_a_valid_quorum(self):
        q = parse_quorum(text(), PATH)
        self.assertEqual(q, Quorum(3, (0, 2, 5), "10.0.0.1:29400", (5,)))
        self.assertEqual(q.rank_of(5), 2)
        self.assertEqual(q.host_port, ("10.0.0.1", 29400))
        self.assertEqual(parse_quorum(text(join=None)).join, ())
        self.assertEqual(parse_quorum(q.to_json()), q)
        self.assertEqual(parse_quorum(text(store="[::1]:80")).host_port, ("::1", 80))

    def test_malformed_files_name_the_file_and_the_field(self):
        self.assertBad("{\"quorum\": 3,", "not JSON")
        self.assertBad("[1, 2]", "not a JSON object")
        for field in ("quorum", "members", "store"):
            self.assertBad(text(**{field: None}), "'%s'" % field, "missing")
        self.assertBad(text(quorum=-1), "'quorum'", "-1")
        self.assertBad(text(quorum=True), "'quorum'")
        self.assertBad(text(quorum="3"), "'quorum'")
        self.assertBad(text(members=[]), "'members'", "empty")
        self.assertBad(text(members=[2, 0, 5]), "'members'", "not sorted")
        self.assertBad(text(members=[0, 0, 5]), "'members'", "duplicates")
        self.assertBad(text(members=[0, -2, 5]), "'members'")
        self.assertBad(text(members=[0, 1.5]), "'members'")
        self.assertBad(text(members="0,2,5"), "'members'")
        self.assertBad(text(store="10.0.0.1"), "'store'")
        self.assertBad(text(store="h:0"), "'store'")
        self.assertBad(text(store=29400), "'store'")
        self.assertBad(text(join=[7]), "'join'", "not in members")
        self.assertBad(text(join=[0, 2, 5]), "'join'", "every member")

    def test_a_replica_not_in_members_is_evicted(self):
        q = parse_quorum(text(), PATH)
        check_member(q, 2, PATH)
        with self.assertRaises(Evicted) as cm:
            check_member(q, 1, PATH)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        for w in (PATH, "'members'", "replica 1", "quorum 3", "evicted"):
            self.assertIn(w, msg)

    def test_the_file_is_reread_only_when_it_changed(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "quorum.json")
            f = QuorumFile(path)
            self.assertIsNone(f.poll())  # not written yet
            with open(path, "w") as out:
                out.write(text())
            self.assertEqual(f.poll().number, 3)
            with open(path + ".new", "w") as out:
                out.write(text(quorum=4, members=[0, 2], join=[]))
            os.rename(path + ".new", path)
            self.assertEqual(f.poll().members, (0, 2))
            with open(path + ".new", "w") as out:
                out.write("garbage")
            os.rename(path + ".new", path)
            with self.assertRaises(QuorumFileError):
                f.poll()


class SignedQuorumTest(unittest.TestCase):
    """Issue 52, broken item 1: one valid-looking quorum.json with a higher number on one
    machine stalled every replica (the step boundary's all_reduce(MAX) moved the whole group
    to a quorum that never came), and the controller then looped or evicted every healthy
    machine. Under an agent (FAULTLINE_QUORUM_KEY set) a quorum is believed only when its
    "mac" is the agent's signature."""

    KEY = "k-of-generation-7"

    def test_the_signature_is_the_agents(self):
        # The same vector as tests/realexec/agent/messages_test.cc (realexec/net/auth.h).
        q = Quorum(12, (0, 2, 5), "10.0.0.1:29401", (5,))
        self.assertEqual(quorum_mac(self.KEY, q),
                         "2be4311009aead4281e0b27568bd71d81ff399b7e83d613480dd1d957324ad31")

    def test_an_unsigned_or_badly_signed_quorum_is_not_believed(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "quorum.json")
            f = QuorumFile(path, key=self.KEY)

            def put(obj):
                with open(path + ".new", "w") as out:
                    out.write(json.dumps(obj))
                os.rename(path + ".new", path)

            good = dict(GOOD)
            good["mac"] = quorum_mac(self.KEY, parse_quorum(json.dumps(GOOD)))
            put(good)
            self.assertEqual(f.poll().number, 3)
            put(dict(GOOD, quorum=1000))  # a neighbour's, a stale or a forged one
            self.assertEqual(f.poll(force=True).number, 3)
            put(dict(good, quorum=1000))  # the signature of another quorum
            self.assertEqual(f.poll(force=True).number, 3)
            put(dict(good, mac=7))
            self.assertEqual(f.poll(force=True).number, 3)
            self.assertEqual(f.refused, 3)
            newer = dict(GOOD, quorum=4)
            newer["mac"] = quorum_mac(self.KEY, parse_quorum(json.dumps(newer)))
            put(newer)
            self.assertEqual(f.poll().number, 4)


class RulesTest(unittest.TestCase):
    def test_the_step_boundary_moves_everyone_to_the_newest_quorum_seen_by_anyone(self):
        self.assertIsNone(switch_target(4, [4, 4, 4]))
        self.assertEqual(switch_target(4, [4, 6, 5]), 6)  # one member saw it: all move
        self.assertIsNone(switch_target(4, []))

    def test_the_source_is_the_lowest_rank_holding_the_newest_step(self):
        self.assertEqual(pick_source([7, 7, 7]), (None, 7))   # nothing to transfer
        self.assertEqual(pick_source([7, -1, 7]), (0, 7))     # a joiner
        self.assertEqual(pick_source([6, 7, 7, -1]), (1, 7))  # a survivor whose step failed
        with self.assertRaises(QuorumError):
            pick_source([-1, -1])


class Pipe:
    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)

    def reports(self):
        try:
            data = os.read(self.r, 1 << 20).decode()
        except BlockingIOError:
            return []
        return [json.loads(line) for line in data.splitlines()]

    def close(self):
        os.close(self.r)
        os.close(self.w)


class GroupTest(unittest.TestCase):
    """The controller's side played here: a TCPStore and the quorum file."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "quorum.json")
        self.store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=10),
                                   wait_for_workers=False)
        self.number = 0
        self.pipes = []

    def tearDown(self):
        gc.collect()  # groups (and failed constructions) die here, not in a later test's thread
        for p in self.pipes:
            p.close()
        self.dir.cleanup()

    def write(self, members, join=(), key=None, number=None):
        if number is None:
            self.number += 1
        obj = {"quorum": self.number if number is None else number, "members": members,
               "store": "127.0.0.1:%d" % self.store.port, "join": list(join)}
        if key:
            obj["mac"] = quorum_mac(key, parse_quorum(json.dumps(obj)))
        with open(self.path + ".tmp", "w") as f:
            f.write(json.dumps(obj))
        os.rename(self.path + ".tmp", self.path)

    def test_a_forged_higher_quorum_does_not_move_the_group(self):
        key = "k-of-generation-7"
        self.write([0], key=key)
        rg, compute, pipe = self.group(0, key=key)
        rg.quorum_wait_s = 3
        self.assertEqual(rg.join(), 0)
        rg.run_step(1, compute)
        self.write([0], number=1000)  # valid-looking, unsigned: not the agent's
        t0 = time.monotonic()
        rg.run_step(2, compute)
        rg.run_step(3, compute)
        self.assertLess(time.monotonic() - t0, 2, "the replica waited for the forged quorum")
        self.assertEqual((rg.quorum.number, rg.step), (1, 3))
        self.assertEqual(rg._file.refused, 1)
        self.write([0], key=key)  # the agent's next quorum is taken as before
        rg.run_step(4, compute)
        self.assertEqual((rg.quorum.number, rg.step), (2, 4))

    def group(self, replica, seed=3, faults=None, key=None, ckpt=None):
        pipe = Pipe()
        self.pipes.append(pipe)
        model, opt = make_model(seed)
        env = {"FAULTLINE_REPLICA": str(replica), "FAULTLINE_REPLICAS": "2",
               "FAULTLINE_QUORUM_FILE": self.path, "FAULTLINE_REPORT_FD": str(pipe.w)}
        if ckpt:
            env.update(FAULTLINE_CKPT_DIR=ckpt, FAULTLINE_CKPT_EVERY="1")
        if faults:
            env["FAULTLINE_FAULT_FILE"] = faults
        if key:
            env["FAULTLINE_QUORUM_KEY"] = key
        rg = ReplicaGroup(model, opt, env=env, timeout_s=10, quorum_wait_s=10, poll_s=0.01)
        return rg, compute_fn(model, opt, replica), pipe

    def test_missing_environment_is_a_clear_error(self):
        model, opt = make_model()
        with self.assertRaisesRegex(QuorumError, "FAULTLINE_REPLICA is not set"):
            ReplicaGroup(model, opt, env={"FAULTLINE_QUORUM_FILE": self.path})
        with self.assertRaisesRegex(QuorumError, "FAULTLINE_QUORUM_FILE is not set"):
            ReplicaGroup(model, opt, env={"FAULTLINE_REPLICA": "0"})

    def test_live_mode_hosts_a_store_on_FAULTLINE_STORE_PORT_for_the_process_life(self):
        port = free_port()
        model, opt = make_model()
        env = {"FAULTLINE_REPLICA": "1", "FAULTLINE_QUORUM_FILE": self.path,
               "FAULTLINE_STORE_PORT": str(port)}
        rg = ReplicaGroup(model, opt, env=env)
        self.assertEqual(rg.store_port, port)
        client = dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=5))
        client.set("k", "v")
        other = dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=5))
        self.assertEqual(other.get("k"), b"v")
        # The port is taken now. A second replica on it (one that takes this one's place on
        # the same host: a migration drilled on one machine) waits for it, and hosts the store
        # once the first one's is gone.
        second = ReplicaGroup(model, opt, env=env, poll_s=0.05)
        self.assertIsNone(second._store_host.server)
        second._store_host.check()  # still trying: not an error yet
        del client, other
        rg._store_host = None
        del rg
        gc.collect()
        end = time.monotonic() + 10
        while second._store_host.server is None and time.monotonic() < end:
            time.sleep(0.05)
        self.assertIsNotNone(second._store_host.server, "the freed port was not taken over")
        # Held past the wait: a one-line error naming the port, reported as fatal at the
        # replica's next step boundary (check() there).
        held = StoreHost(port, 5, 0.3, 0.05)
        held._thread.join(5)
        with self.assertRaises(QuorumError) as cm:
            held.check()
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertIn("FAULTLINE_STORE_PORT=%d" % port, msg)
        # Without the variable (the harness hosts the store) no store is hosted.
        self.assertIsNone(ReplicaGroup(model, opt, env={"FAULTLINE_REPLICA": "0",
                                                        "FAULTLINE_QUORUM_FILE": self.path})
                          .store_port)

    def test_a_malformed_FAULTLINE_STORE_PORT_is_a_one_line_error(self):
        model, opt = make_model()
        for bad in ("0", "65536", "-1", "29400x", "1.5"):
            env = {"FAULTLINE_REPLICA": "0", "FAULTLINE_QUORUM_FILE": self.path,
                   "FAULTLINE_STORE_PORT": bad}
            with self.assertRaises(QuorumError) as cm:
                ReplicaGroup(model, opt, env=env)
            msg = str(cm.exception)
            self.assertNotIn("\n", msg)
            self.assertIn("FAULTLINE_STORE_PORT=%r" % bad, msg)
            self.assertIn("1..65535", msg)

    def test_FAULTLINE_REPLICA_TIMEOUT_S_is_the_default_timeout(self):
        model, opt = make_model()
        env = {"FAULTLINE_REPLICA": "0", "FAULTLINE_QUORUM_FILE": self.path}
        self.assertEqual(ReplicaGroup(model, opt, env=env).timeout_s, DEFAULT_TIMEOUT_S)
        env["FAULTLINE_REPLICA_TIMEOUT_S"] = "5"
        self.assertEqual(ReplicaGroup(model, opt, env=env).timeout_s, 5.0)
        env["FAULTLINE_REPLICA_TIMEOUT_S"] = " 0.25 "
        self.assertEqual(ReplicaGroup(model, opt, env=env).timeout_s, 0.25)
        self.assertEqual(ReplicaGroup(model, opt, env=env, timeout_s=7).timeout_s, 7)  # caller's
        for bad in ("0", "-3", "nan", "inf", "5s"):
            env["FAULTLINE_REPLICA_TIMEOUT_S"] = bad
            with self.assertRaises(QuorumError) as cm:
                ReplicaGroup(model, opt, env=env)
            msg = str(cm.exception)
            self.assertNotIn("\n", msg)
            self.assertIn("FAULTLINE_REPLICA_TIMEOUT_S=%r" % bad, msg)

    def test_the_fault_files_crash_and_hang_fire_at_a_step_the_others_wait(self):
        """`faultline live inject --fault crash|hang` under an agent: consumed, then fired at the
        next step (crash: a fatal report, the signature on stderr, exit 1; hang: blocked for
        good). A child process each, since both end (or stop) the process."""
        faults = os.path.join(self.dir.name, "faults")
        script = (
            "import os, sys, torch\n"
            "from faultline.replicas import ReplicaGroup\n"
            "m = torch.nn.Linear(2, 1)\n"
            "rg = ReplicaGroup(m, torch.optim.SGD(m.parameters(), lr=0.1), env={\n"
            "    'FAULTLINE_REPLICA': '0', 'FAULTLINE_QUORUM_FILE': %r,\n"
            "    'FAULTLINE_REPORT_FD': '1', 'FAULTLINE_FAULT_FILE': %r})\n"
            "rg._fire_faults()\n"
            "print('no fault fired', flush=True)\n" % (self.path, faults))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))), *sys.path]))
        run = lambda timeout: subprocess.run([sys.executable, "-c", script], env=env,
                                             capture_output=True, text=True, timeout=timeout)
        with open(faults, "w") as f:
            f.write("id=n1 nan\nid=c1 crash CUDA error: an illegal memory access\n")
        p = run(60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("CUDA error: an illegal memory access", p.stderr)
        reports = [json.loads(line) for line in p.stdout.splitlines()]
        # Each acknowledged before it acts: the agent confirms the crash before the exit.
        self.assertEqual(reports, [
            {"type": "fault", "rank": 0, "id": "n1", "fault": "nan"},
            {"type": "fault", "rank": 0, "id": "c1", "fault": "crash"},
            {"type": "fatal", "rank": 0, "signature": "CUDA error: an illegal memory access"}])
        with open(faults) as f:
            self.assertEqual(f.read(), "", "both consumed")
        p = run(60)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "no fault fired"), p.stderr)
        with open(faults, "w") as f:
            f.write("hang\n")
        child = subprocess.Popen([sys.executable, "-c", script], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while os.path.getsize(faults) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(os.path.getsize(faults), 0, "the hang consumed before it blocks")
            time.sleep(1)
            self.assertIsNone(child.poll(), "blocked for good after consuming the hang")
        finally:
            child.kill()
            child.wait()

    def train_pair(self, directive, steps, step_s=0.0):
        """Replicas 0 and 1 in threads, `directive` in replica 1's fault file (its machine's):
        the reports of each after `steps` steps, and the fault file's text after them."""
        faults = os.path.join(self.dir.name, "faults.1")
        with open(faults, "w") as f:
            f.write(directive + "\n")
        self.write([0, 1])
        pairs = [self.group(0), self.group(1, faults=faults)]
        errors = []

        def train(rg, compute):
            def slowed(step):
                loss = compute(step)
                time.sleep(step_s)
                return loss
            try:
                rg.join()
                while rg.step < steps:
                    rg.run_step(rg.step + 1, slowed)
            except Exception as e:  # reported by the assertion below
                errors.append(e)
        threads = [threading.Thread(target=train, args=(rg, c)) for rg, c, _ in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a replica hung")
        self.assertEqual(errors, [])
        with open(faults) as f:
            left = f.read()
        return [p.reports() for _, _, p in pairs], left

    def test_nan_slow_and_sdc_of_the_fault_file_act_and_are_acknowledged(self):
        """Every kind `faultline live inject` writes is expressed by replica groups, and
        acknowledged by its id before it acts (the agent confirms the fault only then)."""
        steps = lambda reps: {r["step"]: r for r in reps if r["type"] == "step"}
        ack = lambda reps: [r for r in reps if r["type"] == "fault"]
        # nan: replica 1's local gradient; the all-reduce carries it to replica 0 as well.
        (r0, r1), left = self.train_pair("id=n1 nan", 3)
        self.assertEqual(ack(r1), [{"type": "fault", "rank": 1, "id": "n1", "fault": "nan"}])
        self.assertEqual(ack(r0), [])
        self.assertLess(r1.index(ack(r1)[0]), r1.index(steps(r1)[1]), "acknowledged first")
        self.assertEqual(left, "", "consumed")
        started = lambda reps: [r for r in reps if r["type"] == "started"][0]
        self.assertEqual(started(r1)["faults"], list(faultline_kinds()))  # what it takes
        self.assertNotIn("faults", started(r0))  # no fault file: it takes none
        for reps in (r0, r1):
            self.assertIs(steps(reps)[1].get("grad_norm_nan"), True)  # the NaN step
            self.assertIs(steps(reps)[2].get("loss_nan"), True)       # every replica's weights
        # sdc after=1: from replica 1's second computed step on, an exponent bit flipped.
        (r0, r1), left = self.train_pair("id=s1 sdc after=1", 3)
        self.assertEqual(ack(r1), [{"type": "fault", "rank": 1, "id": "s1", "fault": "sdc"}])
        self.assertEqual(left, "id=s1 sdc after=1\n", "persistent: it stays")
        for reps in (r0, r1):
            self.assertLess(steps(reps)[1]["grad_norm"], 100)
            self.assertGreater(steps(reps)[2]["grad_norm"], 1e6)
        # slow 4: replica 1's steps take 4x; replica 0 waits for it in the all-reduce.
        (r0, r1), left = self.train_pair("id=w1 slow 4", 2, step_s=0.1)
        self.assertEqual(ack(r1), [{"type": "fault", "rank": 1, "id": "w1", "fault": "slow"}])
        for reps in (r0, r1):
            self.assertGreaterEqual(steps(reps)[2]["step_time_s"], 0.35)

    def test_a_group_of_one_trains_like_plain_sgd_follows_quorums_and_is_evicted(self):
        self.write([0])
        rg, compute, pipe = self.group(0)
        plain, plain_opt = make_model()
        plain_compute = compute_fn(plain, plain_opt, 0)
        self.assertEqual(rg.join(), 0)
        for step in range(1, 4):
            loss = rg.run_step(step, compute)
            self.assertEqual(float(loss), float(plain_compute(step)))
            plain_opt.step()
        for a, b in zip(rg.model.parameters(), plain.parameters()):
            self.assertTrue(torch.equal(a, b))  # the mean over one member is the gradient
        self.write([0])  # a new quorum, same member: taken at the next step boundary
        rg.run_step(4, compute)
        self.assertEqual((rg.quorum.number, rg.members, rg.step), (2, [0], 4))
        with self.assertRaises(ValueError):
            rg.run_step(6, compute)
        self.write([1, 2])
        with self.assertRaises(Evicted) as cm:
            rg.run_step(5, compute)
        self.assertIn("replica 0", str(cm.exception))
        reps = pipe.reports()
        self.assertEqual([r["type"] for r in reps],
                         ["quorum", "started", "step", "step", "step", "quorum", "step", "fatal"])
        self.assertEqual(reps[1], {"type": "started", "rank": 0, "step": 0,
                                   "restored_from": "init", "pid": os.getpid()})
        self.assertEqual(reps[5], {"type": "quorum", "rank": 0, "quorum": 2, "members": [0],
                                   "step": 3})
        self.assertIn("evicted", reps[-1]["signature"])

    def test_a_joiner_and_a_member_behind_receive_the_state_bit_for_bit(self):
        self.write([0])
        a, compute_a, _ = self.group(0)
        a.join()
        for step in range(1, 4):
            a.run_step(step, compute_a)
        # Replica 1 (other initial weights) joins; replica 2 is fresh but not listed in
        # "join": its step 0 is behind, so it receives the state as well.
        b, compute_b, pipe_b = self.group(1, seed=11)
        c, compute_c, _ = self.group(2, seed=12)
        self.write([0, 1, 2], join=[1])
        errors = []

        def joiner(rg, compute):
            try:
                rg.join()
                rg.run_step(rg.step + 1, compute)
            except Exception as e:  # reported by the assertion below
                errors.append(e)
        threads = [threading.Thread(target=joiner, args=(b, compute_b)),
                   threading.Thread(target=joiner, args=(c, compute_c))]
        for t in threads:
            t.start()
        a.run_step(4, compute_a)
        for t in threads:
            t.join(30)
        self.assertFalse(any(t.is_alive() for t in threads), "a joiner hung")
        self.assertEqual(errors, [])
        self.assertEqual((b.step, c.step, b.restored_from, c.restored_from), (4, 4, "peer", "peer"))
        self.assertEqual(len({a.digest(), b.digest(), c.digest()}), 1)
        momenta = [[rg.optimizer.state[p]["momentum_buffer"] for p in rg.model.parameters()]
                   for rg in (a, b, c)]
        for m in momenta[1:]:
            self.assertTrue(all(torch.equal(x, y) for x, y in zip(momenta[0], m)))
        reps = pipe_b.reports()
        self.assertEqual(reps[0]["type"], "quorum")
        self.assertEqual((reps[0]["source"], reps[0]["received"], reps[0]["step"]), (0, [1, 2], 3))
        self.assertEqual(reps[1]["restored_from"], "peer")

    def test_a_world_restart_resumes_from_the_newest_checkpoint_before_a_nan(self):
        """A NaN stops every replica and the world restarts (every process new): each replica
        restores its own newest checkpoint, never a poisoned state, and one on a machine with
        an empty disk receives it from a peer (before, every replica started from step 0)."""
        disk = os.path.join(self.dir.name, "m0")
        faults = os.path.join(self.dir.name, "faults.0")
        open(faults, "w").close()
        self.write([0])
        rg, compute, pipe = self.group(0, faults=faults, ckpt=disk)
        rg.join()
        for step in (1, 2, 3):
            rg.run_step(step, compute)
        healthy = rg.digest()
        with open(faults, "w") as f:
            f.write("id=n1 nan\n")
        rg.run_step(4, compute)  # the NaN step
        rg.run_step(5, compute)  # NaN parameters
        steps = [r for r in pipe.reports() if r["type"] == "step"]
        self.assertEqual([r["checkpoint_step"] for r in steps], [1, 2, 3, 3, 3])
        self.assertEqual(sorted(os.listdir(os.path.join(disk, "rank0"))),
                         ["step-%010d.pt" % s for s in (1, 2, 3)])
        rg.close()
        # The restart: replica 0 on its disk, replica 1 on a machine with an empty one.
        self.write([0, 1])
        pairs = [self.group(0, seed=11, ckpt=disk),
                 self.group(1, seed=12, ckpt=os.path.join(self.dir.name, "s0"))]
        joined, errors = {}, []

        def join(rg):
            try:
                joined[rg.replica] = rg.join()
            except Exception as e:  # reported by the assertion below
                errors.append(e)
        threads = [threading.Thread(target=join, args=(g,)) for g, _, _ in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(joined, {0: 3, 1: 3})
        started = [[r for r in p.reports() if r["type"] == "started"][0] for _, _, p in pairs]
        self.assertEqual([r["restored_from"] for r in started], ["local", "peer"])
        self.assertEqual([g.digest() for g, _, _ in pairs], [healthy, healthy])

    def test_a_survivor_whose_step_failed_after_its_peer_committed_it_receives_the_state(self):
        # Replica 1's all_reduce of step 3 "fails" after it completed: replica 0 committed step
        # 3 and replica 1 did not (a peer dying at the end of a ring all_reduce does that).
        self.write([0, 1])
        a, compute_a, pipe_a = self.group(0)
        b, compute_b, pipe_b = self.group(1)
        real = b._average_gradients
        from faultline.replicas import PeerFailure

        def flaky():
            real()
            if b.step == 2 and b.quorum.number == 1:
                raise PeerFailure("injected after the all_reduce")
        b._average_gradients = flaky
        results = {0: [], 1: []}
        errors = []

        def train(rg, compute):
            try:
                rg.join()
                while rg.step < 6:
                    loss = rg.run_step(rg.step + 1, compute)
                    results[rg.replica].append((rg.step, loss is not None))
            except Exception as e:  # reported by the assertion below
                errors.append(e)
        threads = [threading.Thread(target=train, args=(a, compute_a)),
                   threading.Thread(target=train, args=(b, compute_b))]
        for t in threads:
            t.start()
        failures = []
        end = time.monotonic() + 20
        while not failures and time.monotonic() < end and not errors:
            failures = [r for p in (pipe_a, pipe_b) for r in p.reports()
                        if r["type"] == "quorum_failed"]
            time.sleep(0.01)
        self.assertTrue(failures, "no failure reported")
        self.write([0, 1])  # the controller's answer: a new quorum, same members
        for t in threads:
            t.join(30)
        self.assertFalse(any(t.is_alive() for t in threads), "a replica hung")
        self.assertEqual(errors, [])
        self.assertEqual(results[0], [(s, True) for s in range(1, 7)])
        self.assertEqual(results[1], [(1, True), (2, True), (3, False), (4, True), (5, True),
                                      (6, True)])
        self.assertEqual(a.digest(), b.digest())
        q2 = [r for r in pipe_b.reports() if r["type"] == "quorum" and r["quorum"] == 2]
        self.assertEqual((q2[0]["source"], q2[0]["received"], q2[0]["step"]), (0, [1], 3))


if __name__ == "__main__":
    unittest.main()
