"""faultline.replicas: fault-tolerant data parallelism across replica groups ("torchft style").

The job runs as R replicas (here one process each, gloo on CPU). Gradients are averaged over
a process group that is rebuilt at every quorum change. When a replica dies the others do not
restart: the collective they were in raises, they discard the step (nothing of it is
committed), wait for the controller's next quorum, rebuild the group among themselves and redo
the step with a smaller global batch. A replacement joins at a step boundary and receives the
parameters and the optimizer state from a live peer, bit for bit.

The controller side writes the quorum file and names in each quorum the TCPStore its group
forms over: in live mode every replica hosts one on FAULTLINE_STORE_PORT for its whole life and
the controller names the lowest live member's; the harness tests/python/replicas_e2e.py hosts
its own. See README.md beside this file, "Replica groups".
"""

import datetime
import gc
import hashlib
import hmac
import io
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from faultline.checkpoint import Checkpointer, CheckpointStore
from faultline.faults import KINDS, ONE_SHOT, FaultFile
from faultline.files import read_file
from faultline.job import flip_exponent_bit
from faultline.report import Reporter

DEFAULT_TIMEOUT_S = 30.0       # a collective (or the group's rendezvous) that takes longer fails
DEFAULT_QUORUM_WAIT_S = 120.0  # after a failure: the longest wait for a new quorum
DEFAULT_POLL_S = 0.05          # quorum file / store polling interval while waiting


class QuorumError(RuntimeError):
    """Fatal: the replica cannot continue. The message is one line naming what failed."""


class QuorumFileError(QuorumError, ValueError):
    """The quorum file holds something that is not a valid quorum."""


class Evicted(QuorumError):
    """A newer quorum does not contain this replica: it must exit."""


class PeerFailure(Exception):
    """A collective of the current group failed (a peer died or hung): redo in a new quorum."""


@dataclass(frozen=True)
class Quorum:
    number: int
    members: tuple     # replica ids, sorted ascending; rank = index
    store: str         # "host:port" of the controller's TCPStore
    join: tuple = ()   # ids whose state comes from a live peer in this quorum

    @property
    def host_port(self):
        host, _, port = self.store.rpartition(":")
        return host.strip("[]"), int(port)

    def rank_of(self, replica):
        return self.members.index(replica)

    def to_json(self):
        return json.dumps({"quorum": self.number, "members": list(self.members),
                           "store": self.store, "join": list(self.join)})


def _int_list(obj, name, where):
    value = obj.get(name)
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise QuorumFileError("%s: field '%s' must be a list of integers >= 0, got %s"
                              % (where, name, json.dumps(value)))
    if len(set(value)) != len(value):
        raise QuorumFileError("%s: field '%s' has duplicates: %s" % (where, name, value))
    return value


def parse_quorum(text, path="<quorum file>"):
    """A Quorum from the file's text; QuorumFileError (one line naming path and field) when
    the text is not one JSON object of the documented form."""
    where = "quorum file %s" % path
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise QuorumFileError("%s: not JSON (%s)" % (where, e)) from None
    if not isinstance(obj, dict):
        raise QuorumFileError("%s: not a JSON object" % where)
    for name in ("quorum", "members", "store"):
        if name not in obj:
            raise QuorumFileError("%s: field '%s' is missing" % (where, name))
    number = obj["quorum"]
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise QuorumFileError("%s: field 'quorum' must be an integer >= 0, got %s"
                              % (where, json.dumps(number)))
    where = "%s (quorum %d)" % (where, number)
    members = _int_list(obj, "members", where)
    if not members:
        raise QuorumFileError("%s: field 'members' is empty" % where)
    if members != sorted(members):
        raise QuorumFileError("%s: field 'members' is not sorted: %s" % (where, members))
    store = obj["store"]
    host, sep, port = store.rpartition(":") if isinstance(store, str) else ("", "", "")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise QuorumFileError("%s: field 'store' must be \"host:port\", got %s"
                              % (where, json.dumps(store)))
    join = _int_list(obj, "join", where) if "join" in obj else []
    if not set(join) <= set(members):
        raise QuorumFileError("%s: field 'join' %s names ids not in members %s"
                              % (where, join, members))
    if len(join) == len(members):
        raise QuorumFileError("%s: field 'join' names every member: no live peer holds the "
                              "state" % where)
    return Quorum(number, tuple(members), store, tuple(sorted(join)))


def quorum_mac(key, quorum):
    """The agent's signature of a quorum (realexec/net/auth.h quorum_mac): HMAC-SHA256 with the
    launch's FAULTLINE_QUORUM_KEY over its number, members, store and joiners, 64 hex digits."""
    msg = "faultline-quorum/1\n%d\n%s\n%s\n%s" % (
        quorum.number, ",".join(str(m) for m in sorted(quorum.members)), quorum.store,
        ",".join(str(m) for m in sorted(quorum.join)))
    return hmac.new(key.encode(), msg.encode(), hashlib.sha256).hexdigest()


def check_member(quorum, replica, path="<quorum file>"):
    """Raises Evicted (one line naming the file and field) when replica is not a member."""
    if replica not in quorum.members:
        raise Evicted("quorum file %s (quorum %d): field 'members' %s does not contain replica "
                      "%d: evicted" % (path, quorum.number, list(quorum.members), replica))


def switch_target(current, seen):
    """The step-boundary rule. Every member contributes the newest quorum number it has seen
    in the file (its current one when nothing newer); the group all-reduces them with MAX.
    Returns the quorum number the whole group moves to before this step, or None to stay:
    all members get the same maximum, so all switch at the same step or none does."""
    agreed = max(seen) if seen else current
    return agreed if agreed > current else None


def pick_source(steps):
    """The state-transfer decision of a new quorum. steps[rank]: that member's committed step,
    -1 when it holds no valid state (a joiner). Returns (source rank or None, step): the lowest
    rank holding the newest step is the source; None when every member already holds it."""
    valid = [s for s in steps if s >= 0]
    if not valid:
        raise QuorumError("no member of the quorum holds a valid state (every one is joining)")
    step = max(valid)
    if all(s == step for s in steps):
        return None, step
    return steps.index(step), step


class QuorumFile:
    """The controller's quorum file, re-read when its identity (inode, size, mtime, ctime)
    changed, and at least every `reread_s` (a rename can reuse an inode number within one
    timestamp tick, with a file of the same size)."""

    def __init__(self, path, reread_s=0.5, key=None):
        self.path = path
        self.reread_s = reread_s
        self.key = key or None  # FAULTLINE_QUORUM_KEY: only quorums signed with it are believed
        self._identity = None
        self._read_at = -math.inf
        self.latest = None  # the newest Quorum read
        self.refused = 0    # quorums read and not believed (not signed with the key)

    def poll(self, force=False):
        """The newest valid Quorum (None while the file does not exist). Raises
        QuorumFileError when the file holds garbage: it is written atomically, so that is a
        controller bug, not a torn write. With a key, a quorum whose "mac" is not the agent's
        signature (quorum_mac) is not believed: one line on stderr names the file and the
        field, and the latest believed quorum stays. force: re-read whatever the identity
        says."""
        try:
            st = os.stat(self.path)
        except OSError:
            return self.latest
        identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        now = time.monotonic()
        if force or identity != self._identity or now - self._read_at >= self.reread_s:
            data = read_file(self.path)
            if data is None:
                return self.latest  # raced with a rename: the next poll reads it
            text = data.decode("utf-8", "replace")
            q = parse_quorum(text, self.path)
            changed = identity != self._identity
            self._identity, self._read_at = identity, now
            if self.key is not None:
                mac = json.loads(text).get("mac")
                if not isinstance(mac, str) or not hmac.compare_digest(
                        mac.encode("utf-8", "replace"), quorum_mac(self.key, q).encode()):
                    # A quorum this replica's agent did not write (a neighbour's, a stale or
                    # a forged one): believed, its number would move the whole group to a
                    # quorum that never comes.
                    if changed:
                        self.refused += 1
                        print("quorum file %s (quorum %d): field 'mac': expected the agent's "
                              "signature with FAULTLINE_QUORUM_KEY, got %s: not believed "
                              "(staying with quorum %s)"
                              % (self.path, q.number, "none" if mac is None else "another",
                                 self.latest.number if self.latest else "none"),
                              file=sys.stderr, flush=True)
                    return self.latest
            if self.latest is None or q.number >= self.latest.number:
                self.latest = q
        return self.latest


def _env_int(env, name, required=True, default=None):
    value = env.get(name, "").strip()
    if not value:
        if required:
            raise QuorumError("environment variable %s is not set" % name)
        return default
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise QuorumError("environment variable %s=%r is not an integer >= 0" % (name, value))
    return n


def _env_port(env, name):
    """A TCP port (1..65535) from env[name]; None when the variable is unset or empty."""
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 0 < n < 65536:
        raise QuorumError("environment variable %s=%r is not a port (an integer 1..65535)"
                          % (name, value))
    return n


def _env_seconds(env, name, default):
    """A duration in seconds (a finite float > 0) from env[name]; default when unset/empty."""
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise QuorumError("environment variable %s=%r is not a number of seconds > 0"
                          % (name, value))
    return x


def host_store(port, timeout_s):
    """A TCPStore server on `port` of every interface (a replica's own store in live mode);
    QuorumError (one line naming FAULTLINE_STORE_PORT and the port) when it cannot bind."""
    try:
        return dist.TCPStore("0.0.0.0", port, None, True, _td(timeout_s),
                             wait_for_workers=False)
    except RuntimeError as e:
        raise QuorumError("cannot host the store on FAULTLINE_STORE_PORT=%d: %s"
                          % (port, " ".join(str(e).split())[:200])) from None


class StoreHost:
    """The TCPStore this replica hosts on `port` (live mode). A port still held when it starts
    (errno 98: the process it replaces on the same host, a migration drilled on one machine,
    is killed only once this one is admitted) is retried in the background every `poll_s`
    for up to `wait_s`: the store is needed only once this replica is a member that is not
    joining. check() raises the QuorumError (one line naming FAULTLINE_STORE_PORT) once the
    retries gave up, or at once for any other failure."""

    def __init__(self, port, timeout_s, wait_s, poll_s=DEFAULT_POLL_S):
        self.port = port
        self.server = None
        self._error = None
        try:
            self.server = host_store(port, timeout_s)
        except QuorumError as e:
            if "errno: 98" not in str(e) and "Address already in use" not in str(e):
                raise
            self._error = e
            self._thread = threading.Thread(target=self._retry,
                                            args=(timeout_s, wait_s, poll_s), daemon=True)
            self._pending = True
            self._thread.start()
            return
        self._pending = False

    def _retry(self, timeout_s, wait_s, poll_s):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(poll_s)
            try:
                self.server = host_store(self.port, timeout_s)
                self._error = None
                break
            except QuorumError as e:
                self._error = e
        self._pending = False

    def check(self):
        """Raises the hosting's QuorumError once it failed for good."""
        if not self._pending and self.server is None and self._error is not None:
            raise self._error


def _td(seconds):
    return datetime.timedelta(seconds=seconds)


class ReplicaGroup:
    """One replica of a fault-tolerant data-parallel job::

        rg = ReplicaGroup(model, optimizer)     # FAULTLINE_REPLICA, _REPLICAS, _QUORUM_FILE
        rg.join()                               # first quorum; a joiner receives the state
        while rg.step < steps:
            rg.run_step(rg.step + 1, compute)   # compute(step): zero_grad, forward, backward,
                                                #   return the loss

    run_step averages the gradients over the live members (an all_reduce SUM of the
    flattened gradients, divided by the number of members) and calls optimizer.step() only
    when that succeeded. On a peer failure it zeroes the gradients, waits for the next quorum,
    rebuilds the group and redoes the step. compute must be a deterministic function of the
    state and (step, replica id): data indexed by step, no global RNG use between steps.

    Environment: FAULTLINE_REPLICA (own id), FAULTLINE_REPLICAS (informative),
    FAULTLINE_QUORUM_FILE, FAULTLINE_REPORT_FD (optional); live mode adds FAULTLINE_STORE_PORT
    (this process hosts a TCPStore on it, every interface, for its whole life) and
    FAULTLINE_REPLICA_TIMEOUT_S (timeout_s when the caller passes None; default 30).

    Attributes: replica (own id), step (last committed step), quorum (the Quorum now),
    members, rank, restored_from ("init" or "peer", after join()), timeout_s, store_port
    (None unless it hosts a store).
    """

    def __init__(self, model, optimizer, env=None, timeout_s=None,
                 quorum_wait_s=DEFAULT_QUORUM_WAIT_S, poll_s=DEFAULT_POLL_S):
        env = os.environ if env is None else env
        self.replica = _env_int(env, "FAULTLINE_REPLICA")
        self.replicas = _env_int(env, "FAULTLINE_REPLICAS", required=False)
        path = env.get("FAULTLINE_QUORUM_FILE", "").strip()
        if not path:
            raise QuorumError("environment variable FAULTLINE_QUORUM_FILE is not set")
        fd = env.get("FAULTLINE_REPORT_FD", "").strip()
        self._reporter = Reporter(int(fd) if fd else None)
        if timeout_s is None:
            timeout_s = self._try(_env_seconds, env, "FAULTLINE_REPLICA_TIMEOUT_S",
                                  DEFAULT_TIMEOUT_S)
        self.timeout_s = timeout_s
        # Live mode: this process hosts a store for its whole life (the controller names the
        # lowest live member's in each quorum); it is never used through this handle.
        port = self._try(_env_port, env, "FAULTLINE_STORE_PORT")
        self.store_port = port
        self._store_host = None if port is None else self._try(StoreHost, port, timeout_s,
                                                                quorum_wait_s, poll_s)
        self.model = getattr(model, "module", model)
        self.optimizer = optimizer
        self.quorum_wait_s = quorum_wait_s
        self.poll_s = poll_s
        self.step = 0
        self.quorum = None
        self.restored_from = None
        self._file = QuorumFile(path, key=env.get("FAULTLINE_QUORUM_KEY", "").strip() or None)
        self._pg = None
        self._stores = {}          # "host:port" -> TCPStore client
        self._been_member = False
        self._has_state = True     # False for a joiner until it received the state
        # Under an agent: the machine's fault file (`faultline live inject`), read at each step
        # as faultline.Job reads it, every kind acknowledged before it acts (_fire_faults).
        faults = env.get("FAULTLINE_FAULT_FILE", "").strip() if fd else ""
        self._faults = FaultFile(faults or None, 0, 1)
        self._corrupt = None       # "nan": this replica's next local gradient is NaN
        # Under an agent: checkpoints on the machine's disk (faultline.Job's layout, this
        # replica's id as its rank), for when the whole world restarts (a NaN stops every
        # replica): each replica restores its own newest, and the first quorum's state
        # agreement takes the newest step any member holds (_sync_state).
        ckpt_dir = env.get("FAULTLINE_CKPT_DIR", "").strip() if fd else ""
        every = self._try(_env_int, env, "FAULTLINE_CKPT_EVERY", required=False, default=0)
        self._ckpt = Checkpointer(CheckpointStore(ckpt_dir, self.replica) if ckpt_dir else None,
                                  every)
        self._computed = 0         # local gradients computed by this process, for "sdc after=N"
        self._boundary_passed = False

    # ----- public -----

    @property
    def members(self):
        return list(self.quorum.members) if self.quorum else []

    @property
    def rank(self):
        return self.quorum.rank_of(self.replica) if self.quorum else None

    def join(self, wait_s=None):
        """Waits (at most wait_s, default quorum_wait_s) for a quorum that contains this
        replica, builds its group and, when this replica is in its "join" list, receives the
        step, parameters and optimizer state from a live peer. Reports "started" and returns
        the last completed step (0 for a fresh start)."""
        if self.quorum is not None:
            raise QuorumError("replica %d: join() called twice" % self.replica)
        own = self._ckpt.restore_own(self.model, self.optimizer)
        if own > 0:
            self.step = own
        self._try(self._enter, 0, time.monotonic() + (self.quorum_wait_s if wait_s is None
                                                      else wait_s), first=True)
        self._reporter.started(self.replica, self.step, self.restored_from,
                               faults=KINDS if self._faults.enabled else None)
        return self.step

    def run_step(self, step, compute):
        """Runs step `step` (= self.step + 1) to its commit and returns compute's loss; None
        when the step was committed by a peer and received in a state transfer instead."""
        if self.quorum is None:
            raise QuorumError("replica %d: run_step() before join()" % self.replica)
        if step != self.step + 1:
            raise ValueError("run_step(%d): the next step is %d" % (step, self.step + 1))
        self._fire_faults()
        while True:
            failure = None
            try:
                if self._boundary_passed:
                    self._boundary_passed = False  # agreed before returning None below
                elif self._step_boundary():
                    continue  # in a new group: its first collective is the boundary's too
                if self.step >= step:
                    # A peer committed this step where ours failed, and we received its
                    # state. The group has passed this boundary: the next call goes straight
                    # to its compute, as the peers do.
                    self._boundary_passed = True
                    return None
                t0 = time.monotonic()
                loss = compute(step)
                self._apply_faults(step, t0)
                self._average_gradients()
            except PeerFailure as e:
                failure = str(e)
            if failure is not None:
                # Outside the except block: no traceback keeps the failed group (and its
                # sockets, which tell the peers still waiting in it) alive while we wait.
                self._zero_grads()
                self._failed(step, failure)
                continue
            grad_norm = self._gradient_norm()
            self.optimizer.step()
            self.step = step
            self._checkpoint(step, grad_norm)
            self._reporter.step(self.replica, step, None if loss is None else float(loss),
                                grad_norm, time.monotonic() - t0, self._ckpt.step)
            return loss

    def digest(self):
        """SHA-256 (hex) of the model's state_dict, names sorted: equal iff bit-identical."""
        return state_digest(self.model)

    def close(self):
        """Leaves the group (no collective)."""
        self._pg = None

    def _checkpoint(self, step, grad_norm):
        try:
            wrote = self._ckpt.after_step(step, grad_norm, self.model, self.optimizer)
        except OSError as e:
            self._try(self._raise, "checkpoint write failed: %s" % e)
        if wrote:
            self._reporter.checkpoint(self.replica, step)

    @staticmethod
    def _raise(msg):
        raise QuorumError(msg)

    def _fire_faults(self):
        """The fault file at the step boundary, as faultline.Job reads it; each directive taken
        is acknowledged to the agent before it acts. One-shot, consumed first: crash (fatal
        report, its signature on stderr, exit 1), hang (block forever, as a rank stuck in a
        collective), nan (this replica's next local gradient is NaN: the all-reduce carries it
        to every replica, whose parameters and later losses are NaN, as in a data-parallel
        job). Persistent: slow FACTOR and sdc after=N (_apply_faults)."""
        self._faults.poll()
        for d in list(self._faults.active):  # a copy: consume() re-reads the file
            if d.kind not in ONE_SHOT or not self._faults.consume(d):
                continue
            self._faults.acknowledge(d, self._reporter, self.replica)
            if d.kind == "nan":
                self._corrupt = "nan"
                continue
            if d.kind == "hang":
                threading.Event().wait()
            self._reporter.fatal(self.replica, d.signature)
            sys.stdout.flush()
            print(d.signature, file=sys.stderr, flush=True)
            os._exit(1)  # a group member must not wait in interpreter teardown for peers
        self._faults.take_persistent(self._reporter, self.replica)

    def _apply_faults(self, step, t0):
        """Between this replica's backward pass and the all-reduce, as a faulty GPU would: nan
        fills its local gradient (of the first parameter) with NaN; sdc flips an exponent bit
        of one element of it from this process's (N+1)-th computed step on (faultline.Job's
        corruption); slow stretches its compute by FACTOR, so the whole group waits for it in
        the all-reduce."""
        sdc = self._faults.persistent("sdc")
        kind, self._corrupt = self._corrupt, None
        if kind is None and sdc is not None and self._computed >= sdc.after:
            kind = "sdc"
        self._computed += 1
        if kind is not None:
            p = next((p for p in self.model.parameters() if p.requires_grad), None)
            if p is not None:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                with torch.no_grad():
                    if kind == "nan":
                        p.grad.fill_(math.nan)
                    else:
                        flip_exponent_bit(p.grad, step)
        slow = self._faults.persistent("slow")
        if slow is not None and slow.factor > 1:
            time.sleep((slow.factor - 1) * (time.monotonic() - t0))

    def _gradient_norm(self):
        """The norm of the averaged gradient (the same on every member): NaN once a NaN reached
        the all-reduce, huge after a flipped exponent."""
        grads = [p.grad.detach() for p in self.model.parameters() if p.grad is not None]
        if not grads:
            return None
        return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))

    # ----- quorum changes -----

    def _try(self, fn, *args, **kwargs):
        """Runs fn; a fatal QuorumError is reported and re-raised."""
        try:
            return fn(*args, **kwargs)
        except QuorumError as e:
            msg = "replica %d: %s" % (self.replica, e)
            self._reporter.fatal(self.replica, msg[:300])
            raise type(e)(msg) from None

    def _step_boundary(self):
        """The per-step agreement: one all_reduce(MAX) of the newest quorum number each member
        has seen; a newer one moves the whole group before this step. True when it moved:
        every member's first collective in a new group is this all_reduce again, so members
        that switched here and members that just joined stay in step."""
        latest = self._try(self._file.poll)
        if self._store_host is not None:
            self._try(self._store_host.check)
        seen = max(self.quorum.number, latest.number if latest else 0)
        t = torch.tensor([seen], dtype=torch.int64)
        self._collective(lambda: self._pg.allreduce([t], dist.ReduceOp.MAX))
        target = switch_target(self.quorum.number, [int(t.item())])
        if target is None:
            return False
        self._drop_group()
        self._try(self._enter, target, time.monotonic() + self.quorum_wait_s)
        return True

    def _drop_group(self):
        """Destroys the group now (closing its connections), not at some later collection."""
        self._pg = None
        gc.collect()

    def _failed(self, step, err):
        q = self.quorum.number
        detail = " ".join(str(err).split())[:200]
        self._log("step %d failed in quorum %d (%s): waiting for quorum > %d"
                  % (step, q, detail, q))
        self._reporter.write({"type": "quorum_failed", "rank": self.replica, "quorum": q,
                              "step": step, "detail": detail})
        self._drop_group()
        self._try(self._enter, q + 1, time.monotonic() + self.quorum_wait_s)

    def _enter(self, min_number, deadline, first=False):
        """Joins the newest quorum numbered >= min_number that contains this replica; a quorum
        that fails while being built (a peer died) moves on to the next one."""
        while True:
            q = self._wait_quorum(min_number, deadline)
            detail = None
            try:
                self._build(q, deadline, first)
                return
            except _Superseded as s:
                min_number = s.number
            except PeerFailure as e:
                detail = " ".join(str(e).split())[:200]
            self._drop_group()
            if detail is not None:
                self._log("quorum %d failed while forming (%s)" % (q.number, detail))
                self._reporter.write({"type": "quorum_failed", "rank": self.replica,
                                      "quorum": q.number, "step": self.step + 1,
                                      "detail": detail})
                min_number = q.number + 1

    def _wait_quorum(self, min_number, deadline):
        announced = False
        while True:
            q = self._file.poll(force=True)
            if q is not None and q.number >= min_number:
                if self.replica in q.members:
                    return q
                if self._been_member:
                    check_member(q, self.replica, self._file.path)
                if not announced:  # a standby: ready, waiting to be let in
                    self._reporter.write({"type": "waiting", "rank": self.replica,
                                          "quorum": q.number})
                    self._log("waiting for a quorum that contains replica %d" % self.replica)
                    announced = True
            if time.monotonic() > deadline:
                raise QuorumError("timed out waiting for a quorum >= %d containing replica %d "
                                  "in %s" % (min_number, self.replica, self._file.path))
            time.sleep(self.poll_s)

    def _store(self, address):
        s = self._stores.get(address)
        if s is None:
            host, port = Quorum(0, (0,), address).host_port
            try:
                s = dist.TCPStore(host, port, None, False, _td(self.timeout_s))
            except RuntimeError as e:
                raise QuorumError("cannot reach the store %s: %s"
                                  % (address, " ".join(str(e).split())[:200])) from None
            self._stores[address] = s
        return s

    def _arrive(self, q, deadline):
        """The store barrier of quorum q, abandoned when a newer quorum appears (_Superseded): a
        member that died before arriving never blocks the gloo rendezvous for its whole
        timeout. QuorumError when the store fails; _StoreTimeout past the deadline."""
        qstore = dist.PrefixStore("q%d" % q.number, self._store(q.store))
        n = len(q.members)
        try:
            qstore.add("arrived", 1)
            while qstore.add("arrived", 0) < n:
                latest = self._file.poll(force=True)
                if latest.number > q.number:
                    raise _Superseded(latest.number)
                if time.monotonic() > deadline:
                    raise _StoreTimeout("timed out waiting for the %d members %s of quorum %d "
                                        "to arrive at the store %s"
                                        % (n, list(q.members), q.number, q.store))
                time.sleep(self.poll_s)
        except RuntimeError as e:
            if isinstance(e, QuorumError):
                raise
            raise QuorumError("store %s: %s" % (q.store, " ".join(str(e).split())[:200])) \
                from None
        return qstore

    def _build(self, q, deadline, first):
        try:
            qstore = self._arrive(q, deadline)
        except QuorumError as e:
            self._stores.pop(q.store, None)  # reconnected if a later quorum names it again
            if self._store_host is None or isinstance(e, _StoreTimeout):
                raise
            # Live mode: the store is a member's and dies with it; the controller names
            # another live member's in its next quorum, so this one failed while forming.
            raise PeerFailure(str(e)) from None
        n = len(q.members)
        rank = q.rank_of(self.replica)
        self._pg = self._collective(lambda: dist.ProcessGroupGloo(
            dist.PrefixStore("gloo", qstore), rank, n, _td(self.timeout_s)), wait=False)
        self.quorum = q
        self._been_member = True
        if first and self.replica in q.join:
            self._has_state = False
        source_id, receivers = self._sync_state(q, rank)
        if first:
            self.restored_from = ("peer" if self.replica in receivers
                                  else "local" if self.step > 0 else "init")
        self._log("quorum %d: members %s, continuing after step %d%s"
                  % (q.number, list(q.members), self.step,
                     "" if source_id is None else " (state from replica %d)" % source_id))
        obj = {"type": "quorum", "rank": self.replica, "quorum": q.number,
               "members": list(q.members), "step": self.step}
        if source_id is not None:
            obj["source"] = source_id
            obj["received"] = receivers
        self._reporter.write(obj)

    def _sync_state(self, q, rank):
        """Agrees on the newest committed step; members without it (joiners, or survivors whose
        last step failed where a peer's committed) receive step, model and optimizer state
        from the lowest-ranked member holding it. Returns (source replica id or None, the ids
        of the members that received the state)."""
        n = len(q.members)
        v = torch.zeros(n, dtype=torch.int64)
        v[rank] = self.step + 1 if self._has_state else 0
        self._collective(lambda: self._pg.allreduce([v], dist.ReduceOp.SUM))
        steps = [int(s) - 1 for s in v]
        try:
            source, step = pick_source(steps)
        except QuorumError as e:
            raise QuorumError("quorum %d: %s" % (q.number, e)) from None
        if source is None:
            return None, []
        receivers = [m for m, s in zip(q.members, steps) if s != step]
        receiving = steps[rank] != step
        if receiving:
            self._has_state = False  # until the whole transfer arrived
        tensors = [t for t in self.model.state_dict().values()]
        for t in tensors:
            self._collective(lambda: self._pg.broadcast(t, source))  # in place
        blob = torch.empty(0, dtype=torch.uint8)
        if rank == source:
            buf = io.BytesIO()
            torch.save(self.optimizer.state_dict(), buf)
            blob = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        size = torch.tensor([blob.numel()], dtype=torch.int64)
        self._collective(lambda: self._pg.broadcast(size, source))
        if rank != source:
            blob = torch.empty(int(size.item()), dtype=torch.uint8)
        self._collective(lambda: self._pg.broadcast(blob, source))
        if receiving:
            state = torch.load(io.BytesIO(blob.numpy().tobytes()), map_location="cpu")
            self.optimizer.load_state_dict(state)
            self.step = step
            self._has_state = True
        return q.members[source], receivers

    # ----- collectives -----

    def _collective(self, fn, wait=True):
        """Runs a collective (or the group's construction); any failure is a PeerFailure."""
        try:
            work = fn()
            if wait:
                work.wait()
            return work
        except RuntimeError as e:
            detail = " ".join(str(e).split())[:300]
        raise PeerFailure(detail)  # outside the except block: no reference to the group

    def _average_gradients(self):
        """One all_reduce SUM per dtype of the flattened gradients, divided by the number of
        members (a missing gradient counts as zeros, so every member sends the same layout)."""
        by_dtype = {}
        for p in self.model.parameters():
            if p.requires_grad:
                by_dtype.setdefault(p.dtype, []).append(p)
        for params in by_dtype.values():
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p))
                              .reshape(-1) for p in params])
            self._collective(lambda: self._pg.allreduce([flat], dist.ReduceOp.SUM))
            flat.div_(len(self.quorum.members))
            offset = 0
            for p in params:
                g = flat[offset:offset + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = g.clone()
                else:
                    p.grad.copy_(g)
                offset += p.numel()

    def _zero_grads(self):
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.detach_()
                p.grad.zero_()

    def _log(self, msg):
        print("faultline replica %d: %s" % (self.replica, msg), file=sys.stderr, flush=True)


class _StoreTimeout(QuorumError):
    """The members of a quorum did not all arrive at its store in time (always fatal)."""


class _Superseded(Exception):
    def __init__(self, number):
        super().__init__(number)
        self.number = number


def state_digest(model):
    """SHA-256 (hex) of a module's state_dict, names sorted."""
    h = hashlib.sha256()
    for name, t in sorted(getattr(model, "module", model).state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()
