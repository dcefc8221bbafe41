"""The fault file, parsed and consumed as the reference job does (realexec/trainjob/faults.cc)."""

import os
import tempfile
import unittest

from faultline.faults import FaultFile, FaultSyntaxError, consume_in_text, parse_line, parse_text


class ParseTest(unittest.TestCase):
    def test_directives(self):
        d = parse_line("crash CUDA error:  illegal address")
        self.assertEqual((d.kind, d.signature, d.local_ranks),
                         ("crash", "CUDA error:  illegal address", [0]))
        self.assertEqual(parse_line("crash").signature, "injected crash")
        self.assertEqual(parse_line("slow 2.5").factor, 2.5)
        self.assertEqual(parse_line("sdc").after, 0)
        self.assertEqual(parse_line("sdc after=7").after, 7)
        d = parse_line("local_rank=1,3 nan")
        self.assertEqual((d.kind, d.local_ranks, d.applies_to(0), d.applies_to(3)),
                         ("nan", [1, 3], False, True))
        self.assertTrue(parse_line("local_rank=all hang").applies_to(5))

    def test_the_agents_id_prefix_names_the_directive(self):
        d = parse_line("id=9f3a-01 local_rank=1,3 crash CUDA error")
        self.assertEqual((d.id, d.kind, d.local_ranks, d.signature),
                         ("9f3a-01", "crash", [1, 3], "CUDA error"))
        self.assertEqual((parse_line("id=a.b_c slow 2").id, parse_line("nan").id), ("a.b_c", ""))
        for bad in ("id= nan", "id=a/b nan", "id=%s nan" % ("x" * 65), "id=x", "id=x bogus"):
            with self.assertRaises(FaultSyntaxError, msg=bad):
                parse_line(bad)

    def test_malformed_lines_are_refused(self):
        for bad in ("hang now", "nan 1", "slow", "slow 0", "slow -1", "slow x", "slow nan",
                    "slow 2 3", "sdc 3", "sdc after=-1", "sdc after=x", "bogus", "local_rank=x nan",
                    "local_rank=1"):
            with self.assertRaises(FaultSyntaxError, msg=bad):
                parse_line(bad)

    def test_text_skips_blanks_and_comments_and_reports_errors_by_line(self):
        directives, errors = parse_text("# comment\n\n  nan  \nbogus\nslow 3\n")
        self.assertEqual([d.kind for d in directives], ["nan", "slow"])
        self.assertEqual(errors, ["line 4: unknown directive 'bogus'"])


class ConsumeTest(unittest.TestCase):
    def test_a_single_rank_line_is_removed(self):
        self.assertEqual(consume_in_text("slow 2\nnan\nnan\n", "nan", 0, 1), "slow 2\nnan\n")

    def test_gone_or_not_ours_is_none(self):
        self.assertIsNone(consume_in_text("slow 2\n", "nan", 0, 1))
        self.assertIsNone(consume_in_text("local_rank=1 nan\n", "local_rank=1 nan", 0, 2))

    def test_a_multi_rank_line_keeps_the_ranks_that_have_not_fired(self):
        self.assertEqual(consume_in_text("local_rank=all nan\n", "local_rank=all nan", 1, 3),
                         "local_rank=0,2 nan\n")
        self.assertEqual(consume_in_text("local_rank=all nan\n", "local_rank=all nan", 0, 0), "")
        line = "local_rank=0,1 crash x y"
        self.assertEqual(consume_in_text(line + "\n", line, 0, 2), "local_rank=1 crash x y\n")

    def test_a_multi_rank_line_keeps_its_id(self):
        line = "id=f00 local_rank=all nan"
        self.assertEqual(consume_in_text(line + "\n", line, 1, 3), "id=f00 local_rank=0,2 nan\n")


class FaultFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "faults")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, text):
        with open(self.path, "a") as f:
            f.write(text)

    def test_a_one_shot_fires_once_across_processes_and_restarts(self):
        self.write("slow 4\nnan\n")
        a, b = FaultFile(self.path, 0, 1), FaultFile(self.path, 0, 1)
        a.poll()
        b.poll()
        nan_a = [d for d in a.active if d.kind == "nan"][0]
        nan_b = [d for d in b.active if d.kind == "nan"][0]
        self.assertTrue(a.consume(nan_a))
        self.assertFalse(b.consume(nan_b))
        with open(self.path) as f:
            self.assertEqual(f.read(), "slow 4\n")  # persistent directives stay
        a.poll()
        self.assertEqual([d.kind for d in a.active], ["slow"])
        self.assertEqual(a.persistent("slow").factor, 4)

    def test_appends_are_seen_at_the_next_poll_and_a_deleted_file_clears(self):
        f = FaultFile(self.path, 1, 2)
        f.poll()
        self.assertEqual(f.active, [])
        self.write("local_rank=1 sdc after=2\nhang\n")
        f.poll()
        self.assertEqual([d.kind for d in f.active], ["sdc"])  # "hang" is local rank 0's
        os.remove(self.path)
        f.poll()
        self.assertEqual(f.active, [])

    def test_each_id_is_acknowledged_once_per_process(self):
        class Reporter:
            def __init__(self):
                self.acks = []

            def fault(self, rank, directive_id, kind):
                self.acks.append((rank, directive_id, kind))
        self.write("id=s1 slow 3\nid=d1 sdc after=2\nnan\n")
        f, rep = FaultFile(self.path, 0, 1), Reporter()
        f.poll()
        for _ in range(3):  # every step boundary
            f.take_persistent(rep, 4)
        nan = [d for d in f.active if d.kind == "nan"][0]
        f.acknowledge(nan, rep, 4)  # written by hand, without an id: nothing to acknowledge
        self.assertEqual(rep.acks, [(4, "s1", "slow"), (4, "d1", "sdc")])

    def test_no_path_disables_faults(self):
        f = FaultFile(None, 0, 1)
        f.poll()
        self.assertEqual(f.active, [])


if __name__ == "__main__":
    unittest.main()
