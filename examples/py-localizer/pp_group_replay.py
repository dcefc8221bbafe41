"""A localization module in Python: single-phase pipeline-group replay.

The port of examples/my-localizer/my_localizer.cc, decision for decision. Where dual-phase
replay (the built-in "replay") spends two rounds to pin one machine, this spends one: it
replays every pipeline-parallel group at once and evicts each group that reproduces the
fault, whole (over-eviction). When more groups fail than pp_replay_max_groups, the fault is
taken to be the code's.

Load it with --plugin, no build step:

    faultline sim compare scenarios/byterobust-dense-9600.json \\
        --plugin examples/py-localizer/pp_group_replay.py \\
        --stacks byterobust,byterobust+localization=pp-group-replay

or from Python: ``faultline.load_plugin("examples/py-localizer/pp_group_replay.py")``.
"""

import faultline


class PipelineGroupReplay(faultline.Localizer):
    info = faultline.Info(
        "pp-group-replay", version="1",
        summary="one replay round over every pipeline group; evicts each failing group whole",
        params=[faultline.Param(
            "pp_replay_max_groups",
            "more failing pipeline groups than this means the code is at fault",
            unit="count", default=2, min=1, max=1e6)])

    def __init__(self, params):
        self.max_groups = int(params["pp_replay_max_groups"])
        self.groups = []

    def begin(self, why, view):
        if not self.groups:  # the slots of each group are the same all run: asked once
            self.groups = [view.pp_group_slots(g) for g in range(view.pp_groups())]
        return faultline.RunReplay(view.machines_of_groups(self.groups),
                                   "pp-group replay: " + why)

    def answer(self, outcome, view):
        if not isinstance(outcome, faultline.ReplayResult):
            return faultline.Located([], False, "replay", "pp-group replay: unexpected answer")
        evict, failing = [], 0
        for failed, group in zip(outcome.group_failed, self.groups):
            if failed:
                failing += 1
                evict += group
        if failing > self.max_groups:
            return faultline.Located(
                [], True, "replay",
                "pp-group replay: %d pipeline groups failed: the code" % failing)
        if not evict:
            return faultline.Located([], False, "replay", "pp-group replay reproduced nothing")
        return faultline.Located(
            evict, False, "analyzer_over_eviction",
            "pp-group replay: evict %d failing pipeline group(s)" % failing)


faultline.register(PipelineGroupReplay)
