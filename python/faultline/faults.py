"""The fault file (<workdir>/faults) that ``faultline live inject`` appends to.

Read at every step boundary exactly as the reference job does (realexec/trainjob/faults.h):

    [id=ID] [local_rank=K|K1,K2|all] crash SIGNATURE...   one-shot: fatal report, SIGNATURE on
                                                   stderr, exit 1
    [local_rank=...] hang                          one-shot: block forever
    [local_rank=...] nan                           one-shot: next step's local gradient is NaN
    [local_rank=...] slow FACTOR                   persistent: step time x FACTOR
    [local_rank=...] sdc [after=N]                 persistent: from this process's (N+1)-th step on,
                                                   flip an exponent bit of one local gradient
                                                   element each step

Without a prefix a directive targets local rank 0. `id=ID` (1 to 64 letters, digits, '.', '_'
or '-'), written by the agent, names the directive: the job acknowledges it by that id in a
"fault" report when it takes it (report.py), before it acts, and the agent confirms the fault to
the controller only then (realexec/PROTOCOL.md, "Fault acknowledgement"). Blank lines and '#'
lines are ignored;
malformed lines are reported on stderr and otherwise ignored. A one-shot directive is
consumed (removed from the file under an flock of its directory) before it acts, so a
restarted rank does not fire it again and two ranks never both fire it.
"""

import fcntl
import math
import os
import sys
from dataclasses import dataclass, field

from faultline.files import read_file, write_atomic

ONE_SHOT = ("crash", "hang", "nan")
KINDS = ("crash", "hang", "nan", "slow", "sdc")  # every kind a job of this library takes
ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_ID = 64


@dataclass
class Directive:
    kind: str                       # crash, hang, nan, slow, sdc
    line: str                       # the trimmed line, identifies it for consumption
    signature: str = ""             # crash
    factor: float = 1.0             # slow
    after: int = 0                  # sdc
    all_local_ranks: bool = False
    local_ranks: list = field(default_factory=lambda: [0])
    id: str = ""                    # the agent's id of the directive ("" when none)

    def applies_to(self, local_rank):
        return self.all_local_ranks or local_rank in self.local_ranks


class FaultSyntaxError(ValueError):
    pass


def _parse_target(target):
    if target == "all":
        return True, []
    ranks = []
    for part in target.split(","):
        if not part.isdigit():
            raise FaultSyntaxError("bad local_rank target '%s' (want K, K1,K2 or all)" % target)
        ranks.append(int(part))
    return False, ranks


def _next_token(s):
    """(first whitespace-delimited token of s, the trimmed rest)."""
    s = s.strip(" \t\r\n")
    tok, _, rest = s.replace("\t", " ").partition(" ")
    return tok, s[len(tok):].strip(" \t\r\n")


def parse_line(line):
    """A Directive for one trimmed, non-comment line; FaultSyntaxError when malformed."""
    tok, rest = _next_token(line)
    directive_id = ""
    if tok.startswith("id="):
        directive_id = tok[3:]
        if not 0 < len(directive_id) <= MAX_ID or not set(directive_id) <= ID_CHARS:
            raise FaultSyntaxError("bad id '%s' (want 1 to %d letters, digits, '.', '_' or '-')"
                                   % (directive_id[:MAX_ID], MAX_ID))
        tok, rest = _next_token(rest)
    all_ranks, ranks = False, [0]
    if tok.startswith("local_rank="):
        all_ranks, ranks = _parse_target(tok[len("local_rank="):])
        tok, rest = _next_token(rest)
    d = Directive(kind=tok, line=line, all_local_ranks=all_ranks, local_ranks=ranks,
                  id=directive_id)
    args = rest.split()
    if tok == "crash":
        d.signature = rest or "injected crash"
    elif tok in ("hang", "nan"):
        if args:
            raise FaultSyntaxError("%s takes no arguments" % tok)
    elif tok == "slow":
        try:
            d.factor = float(args[0]) if len(args) == 1 else math.nan
        except ValueError:
            d.factor = math.nan
        if not math.isfinite(d.factor) or d.factor <= 0:
            raise FaultSyntaxError("slow wants one positive FACTOR")
    elif tok == "sdc":
        if args and (len(args) != 1 or not args[0].startswith("after=")
                     or not args[0][6:].isdigit()):
            raise FaultSyntaxError("sdc takes an optional after=N (N >= 0)")
        d.after = int(args[0][6:]) if args else 0
    elif not tok:
        raise FaultSyntaxError("missing directive")
    else:
        raise FaultSyntaxError("unknown directive '%s'" % tok)
    return d


def parse_text(text):
    """(directives in file order, ["line N: what is wrong", ...])."""
    directives, errors = [], []
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            directives.append(parse_line(line))
        except FaultSyntaxError as e:
            errors.append("line %d: %s" % (n, e))
    return directives, errors


def _body(line):
    """(the id= prefix of a line or "", the directive text without its id= and local_rank=
    prefixes)."""
    tok, rest = _next_token(line)
    ident = ""
    if tok.startswith("id="):
        ident, line = tok, rest
        tok, rest = _next_token(rest)
    return ident, rest if tok.startswith("local_rank=") else line.strip()


def consume_in_text(text, line, local_rank, local_world_size):
    """The text after local_rank consumed the first line equal to `line` that applies to it,
    or None when no such line is left. A multi-rank line keeps the ranks that have not fired;
    local_world_size <= 0 (unknown) removes a local_rank=all line at once."""
    out, done = [], False
    for raw in text.splitlines(keepends=True):
        trimmed = raw.strip()
        d = None
        if not done and trimmed == line:
            try:
                d = parse_line(trimmed)
            except FaultSyntaxError:
                d = None
        if d is None or not d.applies_to(local_rank):
            out.append(raw)
            continue
        done = True
        targets = range(local_world_size) if d.all_local_ranks else d.local_ranks
        left = [k for k in targets if k != local_rank]
        if left:
            ident, body = _body(trimmed)
            out.append("%slocal_rank=%s %s\n" % (ident + " " if ident else "",
                                                  ",".join(map(str, left)), body))
    return "".join(out) if done else None


class FaultFile:
    """One rank's view of its machine's fault file; cheap to poll at every step boundary.
    path None disables fault injection."""

    def __init__(self, path, local_rank, local_world_size):
        self._path = path
        self._local_rank = local_rank
        self._local_world_size = local_world_size
        self._identity = None  # (inode, size, mtime_ns) of the text parsed last
        self.active = []       # directives that apply to this rank, in file order
        self._acknowledged = set()  # ids this process acknowledged

    @property
    def enabled(self):
        return self._path is not None

    def poll(self):
        """Re-reads the file when its identity, size or mtime changed."""
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
        except OSError:
            self._identity, self.active = None, []
            return
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        if identity == self._identity:
            return
        data = read_file(self._path)
        if data is None:
            return  # raced with a rename: try again at the next step boundary
        self._identity = identity
        directives, errors = parse_text(data.decode("utf-8", "replace"))
        for e in errors:
            print("faultline: fault file %s: %s (ignored)" % (self._path, e), file=sys.stderr)
        self.active = [d for d in directives if d.applies_to(self._local_rank)]

    def consume(self, d):
        """Removes d for this rank from the file atomically. True when this process consumed
        it; False when it was gone already (someone else fired it): then it must not act."""
        if self._path is None:
            return False
        directory = os.path.dirname(self._path) or "."
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            data = read_file(self._path)
            rewritten = None
            if data is not None:
                rewritten = consume_in_text(data.decode("utf-8", "replace"), d.line,
                                            self._local_rank, self._local_world_size)
            if rewritten is not None:
                write_atomic(self._path, rewritten.encode())
        finally:
            os.close(dfd)  # releases the lock
        self._identity = None  # re-read at the next poll
        return rewritten is not None

    def acknowledge(self, d, reporter, rank):
        """Tells the agent that this process took d, before it acts: a "fault" report with d's
        id, once per id and process (a persistent directive is taken at every step). A
        directive without an id (written by hand) is not acknowledged."""
        if d.id and d.id not in self._acknowledged:
            self._acknowledged.add(d.id)
            reporter.fault(rank, d.id, d.kind)

    def take_persistent(self, reporter, rank):
        """Acknowledges the persistent directives in force (slow, sdc) the first time this
        process sees each; call at each step boundary after poll()."""
        for kind in ("slow", "sdc"):
            d = self.persistent(kind)
            if d is not None:
                self.acknowledge(d, reporter, rank)

    def persistent(self, kind):
        """The last active directive of a persistent kind ("slow", "sdc"), or None."""
        found = None
        for d in self.active:
            if d.kind == kind:
                found = d
        return found
