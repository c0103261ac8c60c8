"""The default and quick plans (issue 19: the suite in under 3 minutes, --quick in 1, same coverage)."""
from umscope import apps, plans, suite

ONE_NODE = {"numa": [{"id": 0, "mem_bytes": 1 << 40, "cpus": list(range(16))}],
            "gpus": [{"device": 0, "sms": 132, "free_mem": 80 << 30}],
            "cpu": {"caches": [{"level": 3, "type": "Unified", "bytes": 300 << 20}]}}
TWO_NODES = dict(ONE_NODE, numa=[{"id": 0, "mem_bytes": 1 << 40, "cpus": list(range(8))},
                                 {"id": 1, "mem_bytes": 1 << 40, "cpus": list(range(8, 16))}])


def test_numa_kinds_only_where_there_are_two_nodes():
    assert plans.numa_kinds(ONE_NODE) == []  # numa:0 would be the system memory again
    assert plans.numa_kinds(TWO_NODES) == ["numa:0", "numa:1"]
    full = plans.default_plan(TWO_NODES)
    assert any(c.kind == "numa:1" for c in full if c.benchmark == "cpu-stream")
    assert not any((c.kind or "").startswith("numa:") for c in plans.default_plan(ONE_NODE))


def test_quick_plan_keeps_every_family_and_report_section():
    full, quick = plans.default_plan(ONE_NODE), plans.default_plan(ONE_NODE, quick=True)
    assert {c.benchmark for c in quick} == {c.benchmark for c in full}
    assert len(quick) < len(full) / 3
    for name in (n for n, a in apps.APPS.items() if a.suite):  # every application, explicit and managed
        modes = {c.params.get("mode") for c in quick if c.benchmark == apps.bench_of(name)}
        assert {"explicit", "managed"} <= modes, name
    # The quick plan keeps the default plan's repetitions: no case asks for fewer than its family's default.
    for c in quick:
        same = [f for f in full if f.benchmark == c.benchmark and f.kind == c.kind]
        if same and "reps" in c.params:
            assert int(c.params["reps"]) >= min(int(f.params.get("reps", 20)) for f in same), c.case_id


def test_cheaper_defaults_are_where_the_figure_is_a_link_figure():
    full = plans.default_plan(ONE_NODE)
    by_id = {c.case_id: c for c in full}
    # Host-resident kinds stream 256 MiB over the link; device-resident ones keep 1 GiB (beyond the L2).
    gs = {c.kind: c.params["bytes"] for c in full if c.benchmark == "gpu-stream"}
    assert gs["pinned"] == gs["registered"] == "256MiB"
    assert gs["device"] == gs["managed,first_touch=gpu"] == "1GiB"
    # The GPU chasing host memory: fewer loads per repetition, same repetitions; elsewhere the default.
    lat = [c for c in full if c.benchmark == "latency"]
    assert all(c.params.get("steps") == str(plans.HOST_CHASE_STEPS) for c in lat
               if c.params["processor"] == "gpu" and c.kind in plans.HOST_RESIDENT)
    assert all("steps" not in c.params for c in lat if c.kind == "device")
    assert all(c.params["reps"] == "5" for c in lat)
    managed = by_id["pingpong managed exchanges=500 pair=cpu-gpu reps=3 warmup=0"]
    assert int(managed.params["exchanges"]) * int(managed.params["reps"]) >= 1500
    assert by_id["pingpong pinned exchanges=10000 pair=cpu-gpu reps=7"]


def test_families_that_measure_a_fresh_process_keep_one_process_per_case():
    opts = {"device": 0}
    full = plans.default_plan(ONE_NODE)
    for c in full:
        if c.benchmark in ("firsttouch", "faults", "migration", "interleave"):
            assert not c.batchable(opts), c.case_id
    # the ping-pong's managed cases migrate pages, which slowed the next case in the same process; the others batch
    pp = [c for c in full if c.benchmark == "pingpong"]
    assert any(c.kind.startswith("managed") for c in pp) and any(not c.kind.startswith("managed") for c in pp)
    for c in pp:
        assert c.batchable(opts) == (not c.kind.startswith("managed")), c.case_id
    assert all(c.batchable(opts) for c in full if c.benchmark in ("gpu-stream", "copy", "latency", "qv"))
    assert not any(c.batchable(dict(opts, isolate=True)) for c in full)
    segs = list(suite._segments(full, opts))
    assert sum(len(s) for s in segs) == len(full)
    assert len(segs) < len(full) / 4  # batched: far fewer processes than cases


def test_cpu_stream_arrays_are_sized_to_the_cache_the_threads_reach():
    # One LLC instance shared by all CPUs (the H100 host: 300 MiB, cpus 0-15): one thread's arrays 2x it
    # (600 MiB), the team's 4x (1200 MiB), as two cases per kind.
    shared = dict(ONE_NODE, cpu={"caches": [], "llc_instances": [{"cpus": list(range(16)), "bytes": 300 << 20}]})
    cs = [c for c in plans.default_plan(shared) if c.benchmark == "cpu-stream"]
    assert {(c.params["bytes"], c.params["threads"]) for c in cs} == {("600MiB", "1"),
                                                                       (plans.size_arg(1200 << 20), "all")}
    assert len(cs) == 2 * len({c.kind for c in cs})
    # One thread's pass repeats SINGLE_THREAD_REPS times (docs/suite-reps.md); the team keeps the default.
    assert {c.params["threads"]: c.params.get("reps") for c in cs} == {"1": str(plans.SINGLE_THREAD_REPS),
                                                                        "all": None}
    assert plans.SINGLE_THREAD_REPS >= 8
    # One instance per 8 CPUs (an AMD CCD of 32 MiB): one thread reaches 32 MiB, all of them 64 MiB.
    ccds = dict(ONE_NODE, cpu={"caches": [], "llc_instances": [{"cpus": list(range(8)), "bytes": 32 << 20},
                                                               {"cpus": list(range(8, 16)), "bytes": 32 << 20}]})
    assert plans.cpu_stream_size(ccds, 1) == 64 << 20
    assert plans.cpu_stream_size(ccds, 8) == 128 << 20  # a team in one instance: 4x it
    assert plans.cpu_stream_size(ccds) == 256 << 20
    cs = [c for c in plans.default_plan(ccds) if c.benchmark == "cpu-stream" and c.kind == "system"]
    assert sorted((c.params["threads"], c.params["bytes"]) for c in cs) == [("1", "64MiB"), ("all", "256MiB")]
    # Equal sizes share one case: a thread list with one entry per size.
    one = dict(ONE_NODE, cpu={"caches": [], "llc_instances": [{"cpus": [0], "bytes": 32 << 20},
                                                              {"cpus": [1], "bytes": 32 << 20}]})
    cs = plans.cpu_stream_cases(one, ["system"], ("2", "all"))
    assert [(c.params["threads"], c.params["bytes"]) for c in cs] == [("2,all", "256MiB")]
    # Nothing known: the old floor.
    assert plans.cpu_stream_size({"cpu": {"caches": []}}) == 256 << 20


def test_probe_reads_llc_instances():
    from umscope import probe
    info = probe.cpu_info()
    for inst in info["llc_instances"]:
        assert inst["cpus"] and inst["bytes"] > 0


def _four_gpus(link_of=lambda a, b: ("NVLink", 18), cpus_of=lambda d: list(range(64)), nvml=True):
    """A 4-GPU fingerprint: link_of(a, b) -> (type, count) for every ordered pair (None: NVML unavailable)."""
    gpus = [{"device": d, "sms": 132, "free_mem": 80 << 30} for d in range(4)]
    pairs = []
    for a in range(4):
        for b in range(4):
            if a != b:
                kind, count = link_of(a, b)
                pairs.append({"a": a, "b": b, "type": kind if nvml else None, "nvlinks": count, "via": "direct",
                              "nvlink_version": 4, "p2p": {"read": True, "write": True}})
    topo = {"gpus": [{"device": d, "numa_node": 0, "cpus": cpus_of(d)} for d in range(4)], "pairs": pairs}
    return dict(ONE_NODE, gpus=gpus, topology=topo)


def _across(cases):
    lat = {(c.params["device"], c.kind) for c in cases if c.benchmark == "latency" and "device" in c.params}
    pp = {(c.params["device"], c.params["peer"]) for c in cases if c.benchmark == "pingpong" and "peer" in c.params}
    peer_copies = {(c.params.get("device", "0"), c.kind, c.params["dst"]) for c in cases if c.benchmark == "copy"
                   and "peer:" in (c.kind + c.params["dst"])}
    return lat, pp, peer_copies


def test_default_plan_measures_one_pair_per_distinct_link_and_says_so():
    """Issue 38: on a uniform NV18 node every GPU pair repeats one figure: the default suite measures pair 0-1
    across GPUs (latency, ping-pong, peer copies) and notes it in the fingerprint; the families' own plans keep
    every pair."""
    fp = _four_gpus()
    lat, pp, copies = _across(plans.default_plan(fp))
    assert lat == {("0", "peer:1")} and pp == {("0", "1")}
    assert {k for _, k, d in copies} | {d for _, _, d in copies} <= {"peer:1", "device", "pinned", "registered",
                                                                      "system"}
    assert "1 of 12 ordered GPU pairs (0-1)" in fp["pair_choice"]["note"]
    assert len(_across(plans.latency_cases(fp, sizes=plans.LATENCY_SHORT))[0]) == 12
    assert len(_across(plans.pingpong_cases(fp))[1]) == 6
    # Two kinds of link (GPUs 0-1 and 2-3 on NV18, the rest NV6): one pair of each.
    two = _four_gpus(lambda a, b: ("NVLink", 18 if {a, b} in ({0, 1}, {2, 3}) else 6))
    lat, pp, copies = _across(plans.default_plan(two))
    assert lat == {("0", "peer:1"), ("0", "peer:2")} and pp == {("0", "1"), ("0", "2")}
    # GPUs on two sockets: the pair within a socket and the pair across differ even with one link type.
    sockets = _four_gpus(cpus_of=lambda d: list(range(32)) if d < 2 else list(range(32, 64)))
    lat, _, _ = _across(plans.default_plan(sockets))
    assert ("0", "peer:1") in lat and ("0", "peer:2") in lat and ("2", "peer:0") in lat
    # Unknown links (no NVML): every pair, and no note.
    blind = _four_gpus(nvml=False)
    lat, pp, _ = _across(plans.default_plan(blind))
    assert len(lat) == 12 and len(pp) == 6 and "pair_choice" not in blind


def test_sm_copies_of_host_memory_with_a_peer_are_left_out_where_they_repeat_the_gpus_own():
    """4 x H100 NV18 (b447ae0): GPU 0's SMs copying pinned or registered memory to and from GPU 1's memory were
    within 9% of the same copies with GPU 0's memory, inside their spreads; by copy engines they were up to 2.6
    times slower at 64 KiB. Where GPU 1 has NVLink to GPU 0 and the same NUMA node, CPUs and PCIe link, the
    default plan keeps the copy engines' host-peer copies and GPU-to-GPU copies, not the SMs' host-peer ones."""
    def with_pcie(fp, widths=(16, 16, 16, 16)):
        for g, w in zip(fp["gpus"], widths):
            g["link"] = {"pcie_gen_max": 5, "pcie_width_max": w}
        return fp

    def host_peer(cases):
        return {(c.kind, c.params["dst"], c.params["engine"]) for c in cases if c.benchmark == "copy"
                and "peer:1" in (c.kind, c.params["dst"]) and bool({c.kind, c.params["dst"]} & hosts)}
    hosts = {"pinned", "registered", "system"}
    every = {x for h in hosts for e in ("ce", "sm") for x in ((h, "peer:1", e), ("peer:1", h, e))}
    fp = with_pcie(_four_gpus())
    plan = plans.default_plan(fp)
    assert host_peer(plan) == {x for x in every if x[2] == "ce"}
    assert {("device", "peer:1", "sm"), ("peer:1", "device", "sm")} <= {
        (c.kind, c.params["dst"], c.params["engine"]) for c in plan if c.benchmark == "copy"}
    assert "SMs copying host memory to and from GPU 1's memory are left out" in fp["pair_choice"]["note"]
    # another PCIe width, other local CPUs, a PCIe link between the GPUs, or no PCIe figure: every copy is kept
    for other in (with_pcie(_four_gpus(), (16, 8, 16, 16)),
                  with_pcie(_four_gpus(cpus_of=lambda d: list(range(32)) if d != 1 else list(range(32, 64)))),
                  with_pcie(_four_gpus(lambda a, b: ("PCIe", 0))), _four_gpus()):
        assert host_peer(plans.default_plan(other)) == every
        assert "GPU 1's memory are left out" not in (other.get("pair_choice") or {}).get("note", "")
    # `umscope bench copy` keeps the whole matrix
    assert host_peer(plans.copy_cases(fp, sizes="64KiB")) == every


def test_scaling_takes_ops_and_refuses_unknown_ones():
    """`bench scaling --ops` was ignored (every case read,copy): Fusco et al.'s Fig. 8 needs the write too."""
    import pytest
    from umscope import options
    from umscope.errors import UsageError
    fp, plan = {"gpus": [{"sms": 132}]}, plans.FAMILIES["scaling"].plan
    default = plan(fp, plans.BenchOptions(kinds=["device"]))
    assert {c.params["ops"] for c in default} == {"read,copy"} and len(default) == 17
    ops = options.bench_options("scaling", ops="read,write")["ops"]
    told = plan(fp, plans.BenchOptions(kinds=["device"], ops=ops))
    assert {c.params["ops"] for c in told} == {"read,write"}
    assert [c.params.get("blocks") for c in told] == [c.params.get("blocks") for c in default]
    with pytest.raises(UsageError, match="unknown value 'bogus'"):
        options.bench_options("scaling", ops="read,bogus")


def test_cases_in_their_own_process_that_the_probe_knows_will_skip_start_no_process(tmp_path, monkeypatch):
    """4 x H100 (b447ae0): 7 cases of the default plan, each in its own process, started one (0.46-0.50 s) to
    skip because the GPU cannot reach pageable memory, which the probe had already read. They are stored as
    skipped with the reason, without a process; a resumed run keeps that; where the GPU can reach pageable
    memory, or the probe does not say, they run."""
    from umscope import suite
    from umscope.store import Store
    fp = _four_gpus()
    for g in fp["gpus"]:
        g["pageable_memory_access"] = False
    plan = plans.default_plan(fp)
    known = sorted(c.case_id for c in plan if c.skip)
    assert len(known) == 7 and all(c.skip == plans.NO_PAGEABLE for c in plan if c.skip)
    assert {c.split()[0] for c in known} == {"migration", "firsttouch", "faults"}
    assert all(" by=gpu" in c or "processor=gpu" in c or c.startswith("migration") for c in known)
    assert not any(c.skip for c in plan if c.benchmark not in suite.ISOLATED)  # a batch skips them cheaply
    assert [c.skip for c in suite.plan_from_json(suite.plan_to_json(plan))] == [c.skip for c in plan]
    for g in fp["gpus"]:
        g["pageable_memory_access"] = True
    assert not any(c.skip for c in plans.default_plan(fp))
    for g in fp["gpus"]:
        del g["pageable_memory_access"]
    assert not any(c.skip for c in plans.default_plan(fp))
    # through the runner: stored as skipped with the reason, and no process started
    case = suite.Case("firsttouch", "system", {"by": "gpu"}, skip=plans.NO_PAGEABLE)
    s = Store(tmp_path / "s.sqlite")
    rid = s.create_run("run", "test", suite.plan_to_json([case]), {}, {})
    started = []
    monkeypatch.setattr(suite.subprocess, "Popen", lambda *a, **k: started.append(a) or 1 / 0)
    assert suite.run_cases(s, rid, [case], {"device": 0}, progress=False) == "complete"
    (row,) = s.cases(rid)
    assert (row["status"], row["reason"]) == ("skipped", plans.NO_PAGEABLE) and not started
