"""ReFrame checks for umscope: one check per benchmark family.

Each check runs `umscope bench FAMILY ... --json` (a small, fast configuration), and reads its
performance variables from the JSON records: the bandwidth (GB/s) or latency (ns) of the cases
that matter and, where umscope knows the datapath's bound (from the packaged machine
description of the GPU, the probe, or the site's `--machine FILE`: set the check variable
`machine`), the efficiency = median / bound. References are written as efficiency of the bound
(the fraction `min_efficiency`, default 0.5), so one reference carries across systems.

    reframe -C contrib/reframe/config/local.py -c contrib/reframe/umscope_checks.py -r
    reframe ... -S umscope_checks.UmscopeCheck.machine=site.yaml -S min_efficiency=0.7 -r

With `baseline` set (a file written by `umscope compare --store fleet.sqlite --save-baseline FILE`),
each check also gates the node: `umscope compare --baseline FILE --fail-over FRACTION` (the variable
`fail_over`, default 0.05) must pass, i.e. no figure the check measured may be worse than the fleet's by
more than the fraction and its own spread; the failing figures are in the stage directory's gate.txt.

    reframe ... -S baseline=/site/umscope/fleet-baseline.json -S fail_over=0.1 -r

GPU families need a partition with the feature `gpu`; CPU families run anywhere."""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

# family -> (umscope bench arguments, needs a GPU, {performance variable: record selector})
FAMILIES = {
    "cpu-stream": (["--kind", "system", "--size", "64M", "--threads", "1", "--reps", "5"], False,
                   {"read": {"op": "read"}, "write": {"op": "write"}, "copy": {"op": "copy"}}),
    "latency": (["--kind", "system", "--size", "16M", "--filter", "processor=cpu"], False,
                {"chase": {"op": "chase"}}),
    "pingpong": (["--kind", "system", "--filter", "cpu-cpu"], False, {"round_trip": {"op": "pingpong"}}),
    "gpu-stream": (["--kind", "device", "--kind", "pinned", "--size", "1G"], True,
                   {"device_read": {"op": "read", "kind": "device"}, "pinned_read": {"op": "read", "kind": "pinned"}}),
    "copy": (["--kind", "pinned", "--kind", "device", "--size", "256M"], True,
             {"h2d": {"op": "ce-copy", "kind": "pinned", "dst_kind": "device", "direction": "uni"},
              "d2h": {"op": "ce-copy", "kind": "device", "dst_kind": "pinned", "direction": "uni"}}),
    "scaling": (["--filter", "device"], True, {"best": {}}),
    "contention": (["--size", "1G"], True, {"best": {}}),
    "migration": (["--kind", "managed", "--size", "1G"], True, {"best": {}}),
    "firsttouch": (["--size", "1G"], True, {"best": {}}),
    "faults": (["--size", "256M"], True, {"best": {}}),
    "interleave": (["--size", "256M"], True, {"best": {}}),
}


def _records(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _select(records, sel):
    """Measured records matching sel (fields of the record or of its extra), best first."""
    out = []
    for r in records:
        if r.get("status") != "ok" or r.get("median") is None:
            continue
        x = r.get("extra") or {}
        if all(r.get(k, x.get(k)) == v for k, v in sel.items()):
            out.append(r)
    lower_better = bool(out) and out[0].get("unit") in ("ns", "us", "ms", "s")
    return sorted(out, key=lambda r: r["median"], reverse=not lower_better)


@rfm.simple_test
class UmscopeCheck(rfm.RunOnlyRegressionTest):
    family = parameter(list(FAMILIES))
    umscope = variable(str, value="umscope")
    machine = variable(str, value="")
    min_efficiency = variable(float, value=0.5)
    baseline = variable(str, value="")
    fail_over = variable(float, value=0.05)
    valid_prog_environs = ["*"]
    executable = "umscope"
    maintainers = ["umscope"]

    @run_after("init")
    def set_systems(self):
        needs_gpu = FAMILIES[self.family][1]
        self.valid_systems = ["+gpu"] if needs_gpu else ["*"]
        self.tags = {"umscope", "gpu" if needs_gpu else "cpu"}

    @run_before("run")
    def set_command(self):
        args = FAMILIES[self.family][0]
        self.executable = self.umscope
        store = os.path.join(self.stagedir, "umscope.sqlite")
        self.executable_opts = ["bench", self.family, *args, "--json", "--no-progress", "--store", store,
                                "--report", os.path.join(self.stagedir, "report.html")]
        if self.machine:
            self.executable_opts += ["--machine", self.machine]
        if self.baseline:
            # the node gate; its exit status is written beside its output, and the sanity check reads both
            self.postrun_cmds = [f"{self.umscope} compare --store {store} --baseline {self.baseline} "
                                 f"--fail-over {self.fail_over} --reference none > gate.txt 2>&1; "
                                 "echo \"gate exit status $?\" >> gate.txt"]

    @sanity_function
    def validate(self):
        recs = _records(os.path.join(self.stagedir, str(self.stdout)))
        bad = [r for r in recs if r.get("status") in ("failed", "timeout")]
        measured = [r for r in recs if r.get("status") == "ok" and r.get("median") is not None]
        checks = [sn.assert_false(bad, msg=f"{len(bad)} case(s) failed: {bad[:1]}"),
                  sn.assert_true(measured, msg="no case was measured")]
        if self.baseline:
            gate = os.path.join(self.stagedir, "gate.txt")
            checks.append(sn.assert_found(r"^gate exit status 0$", gate,
                                          msg=f"the node gate failed against {self.baseline} (see gate.txt)"))
        return sn.all(checks)

    @run_before("performance")
    def set_perf_variables(self):
        recs = _records(os.path.join(self.stagedir, str(self.stdout)))
        perf, ref = {}, {}
        for name, sel in FAMILIES[self.family][2].items():
            best = _select(recs, sel)
            if not best:
                continue
            rec = best[0]
            perf[name] = sn.make_performance_function(sn.defer(rec["median"]), rec["unit"])
            eff = (rec.get("extra") or {}).get("efficiency")
            if eff is not None:
                # the reference is the bound itself (1.0); pass down to min_efficiency of it
                perf[f"{name}_efficiency"] = sn.make_performance_function(sn.defer(eff), "of bound")
                ref[f"{name}_efficiency"] = (1.0, self.min_efficiency - 1.0, None, "of bound")
        self.perf_variables = perf
        self.reference = {"*": ref}
