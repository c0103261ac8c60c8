"""Topology, --device/--devices, GPU-local placement and the multi-GPU plans, on the CPU.

The fingerprints below are SYNTHETIC TEST INPUT (shaped like `umscope info --json` on a node of two
H200s joined by 18 NVLink 4 links, one socket), not measurements."""
import json
import types

import pytest

from conftest import umbench
from umscope import devices, nvml, plans
from umscope.model import bounds
from umscope.report import topology
from umscope.store import Store
from umscope.suite import Case


def _gpu(d, bus):
    return {"device": d, "name": "NVIDIA H200", "sms": 132, "free_mem": 140 << 30, "total_mem": 141 << 30,
            "mem_clock_khz": 3201000, "mem_bus_bits": 6144, "pci_bus_id": bus, "addressing": "HMM", "numa_id": -1,
            "link": {"pcie_gen_max": 5, "pcie_width_max": 16, "mem_clock_max_mhz": 3201, "mem_bus_width_bits": 6144},
            "peers": [{"device": 1 - d, "access": True, "atomics": True, "rank": 0}]}


SYNTHETIC_2GPU = {  # test input, not a measurement
    "host": {"hostname": "synthetic"}, "cpu": {"caches": []}, "cuda": {},
    "numa": [{"id": 0, "mem_bytes": 1 << 40, "cpus": list(range(32))}],
    "gpus": [_gpu(0, "0000:1b:00.0"), _gpu(1, "0000:43:00.0")],
    "topology": {"nvml": True, "why_no_nvml": None,
                 "gpus": [{"device": 0, "pci_bus_id": "0000:1b:00.0", "cpus": list(range(32)), "numa_node": 0,
                           "source": "NVML nvmlDeviceGetCpuAffinity", "nvlinks": 18},
                          {"device": 1, "pci_bus_id": "0000:43:00.0", "cpus": list(range(32)), "numa_node": 0,
                           "source": "NVML nvmlDeviceGetCpuAffinity", "nvlinks": 18}],
                 "pairs": [{"a": a, "b": 1 - a, "type": "NVLink", "nvlinks": 18, "nvlink_version": 6,
                            "nvlink_generation": "4.0", "via": "NVSwitch",
                            "common_ancestor": {"level": 30, "text": "PCIe host bridge"},
                            "p2p": {"read": True, "write": True, "nvlink": True, "atomics": True}} for a in (0, 1)]},
}


def _one_gpu():
    fp = json.loads(json.dumps(SYNTHETIC_2GPU))
    fp["gpus"] = fp["gpus"][:1]
    fp["topology"]["gpus"] = fp["topology"]["gpus"][:1]
    fp["topology"]["pairs"] = []
    return fp


# --- NVML through nvidia-ml-py --------------------------------------------------------------------

def test_nvml_without_a_driver_says_why_and_answers_none():
    if nvml.available():
        pytest.skip("NVML works here")
    assert nvml.why_unavailable()
    assert nvml.device_count() == 0
    assert nvml.memory(0) is None and nvml.processes(0) is None and nvml.power_w(0) is None
    assert set(nvml.device_info("0000:1b:00.0").values()) == {None}
    assert nvml.nvlinks(0) == []


def test_bus_ids_of_nvml_and_cuda_compare_equal():
    assert nvml.bus_key("00000000:1B:00.0") == nvml.bus_key("0000:1b:00.0") == "0000:1b:00.0"
    assert nvml.bus_key(b"00000001:43:00.0") == "0001:43:00.0"


def test_cpu_affinity_mask_to_cpu_list():
    assert nvml.cpu_list([0b1011, 1]) == [0, 1, 3, 64]
    assert topology.ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


class _FakeNVML(types.SimpleNamespace):
    """A stand-in pynvml: two GPUs, each with 18 active NVLink 4 links to NVSwitches (synthetic)."""
    class NVMLError(Exception):
        pass

    NVML_NVLINK_MAX_LINKS = 36

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return nvml.bus_key(bus)

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= 18:
            raise self.NVMLError("not supported")
        return 1

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return 6

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return types.SimpleNamespace(busId=b"00000000:0A:00.0")  # a switch

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        if getattr(self, "no_type", False):
            raise self.NVMLError("not supported")
        return 2

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30

    def nvmlDeviceGetP2PStatus(self, a, b, idx):
        return 0 if idx != 3 else 5  # no atomics


def test_pair_link_counts_nvlinks_through_switches_and_reads_p2p(monkeypatch):
    fake = _FakeNVML()
    monkeypatch.setattr(nvml, "_init", lambda: (fake, ""))
    nvml._handle.cache_clear()
    try:
        la, lb = nvml.nvlinks("0000:1b:00.0"), nvml.nvlinks("0000:43:00.0")
        assert len(la) == 18 and la[0]["version"] == 6
        pair = nvml.pair_link("0000:1b:00.0", "0000:43:00.0", la, lb)
    finally:
        nvml._handle.cache_clear()
    assert pair["type"] == "NVLink" and pair["nvlinks"] == 18 and pair["via"] == "NVSwitch"
    assert pair["nvlink_generation"] == "4.0"
    assert pair["common_ancestor"] == {"level": 30, "text": "PCIe host bridge"}
    assert pair["p2p"] == {"read": True, "write": True, "nvlink": True, "atomics": False}


def test_pair_link_without_remote_type_trusts_nvml_p2p_over_nvlink_and_else_pcie(monkeypatch):
    fake = _FakeNVML(no_type=True)
    monkeypatch.setattr(nvml, "_init", lambda: (fake, ""))
    nvml._handle.cache_clear()
    try:
        la = nvml.nvlinks("0000:1b:00.0")
        assert la[0]["remote_type"] is None
        assert nvml.pair_link("0000:1b:00.0", "0000:43:00.0", la, la)["via"] == "NVSwitch"
        fake.nvmlDeviceGetP2PStatus = lambda a, b, idx: 2  # no P2P of any kind
        pair = nvml.pair_link("0000:1b:00.0", "0000:43:00.0", la, la)
        assert pair["type"] == "PCIe" and pair["via"] == "PCIe host bridge" and not any(pair["p2p"].values())
        assert nvml.pair_link("0000:1b:00.0", "0000:43:00.0", [], [])["type"] == "PCIe"
    finally:
        nvml._handle.cache_clear()


# --- bounds from the topology ----------------------------------------------------------------------

def test_peer_bound_comes_from_links_times_rate_with_its_source():
    bw, src = bounds.peer_link(SYNTHETIC_2GPU, 0, 1)
    assert bw == 450.0
    assert src.startswith("probe: 18 NVLink4 links") and "25 GB/s" in src
    desc = bounds.describe(SYNTHETIC_2GPU)
    assert desc["datapaths"]["peer_in"][1].startswith("probe:")  # the packaged YAML is only the fallback


def test_pcie_peer_bound_and_yaml_fallback():
    fp = json.loads(json.dumps(SYNTHETIC_2GPU))
    for p in fp["topology"]["pairs"]:
        p.update(type="PCIe", nvlinks=0, via="PCIe host bridge", nvlink_generation=None)
    bw, src = bounds.peer_link(fp, 0, 1)
    assert bw == pytest.approx(63.02, abs=0.01) and "PCIe gen 5 x16" in src
    fp["topology"]["pairs"] = []
    assert "yaml" in bounds.describe(fp)["datapaths"]["peer_link"][1]


def test_bounds_follow_the_selected_device():
    fp = json.loads(json.dumps(SYNTHETIC_2GPU))
    fp["gpus"][1]["name"] = "NVIDIA H100 80GB HBM3"
    fp["gpus"][1]["link"]["pcie_gen_max"] = 4
    assert bounds.describe(dict(fp, device=1))["datapaths"]["h2d"][1] == "probe: PCIe gen 4 x16"
    assert bounds.describe(fp)["datapaths"]["h2d"][1] == "probe: PCIe gen 5 x16"
    # GPU 1 sits on NUMA node 1 (a GH200-like memory node): numa:1 is its own memory, not GPU 0's.
    fp["gpus"][1]["numa_id"] = 1
    recs = [{"benchmark": "gpu-stream", "op": "read", "kind": "numa:1", "unit": "GB/s", "median": 20.0, "device": d}
            for d in (0, 1)]
    bounds.annotate(recs, fp, bounds.describe(fp))
    assert [r["datapath"] for r in recs] == ["h2d", "gpu_memory"]


# --- plans over every GPU pair ---------------------------------------------------------------------

def _pairs_covered(cases, engine, direction):
    out = set()
    for c in cases:
        if c.benchmark != "copy" or c.params.get("engine") != engine or c.params.get("direction") != direction:
            continue
        dev = int(c.params.get("device", 0))
        if c.kind == "device" and c.params["dst"].startswith("peer:"):
            out.add((dev, int(c.params["dst"][5:])))
        elif c.kind.startswith("peer:") and c.params["dst"] == "device":
            out.add((int(c.kind[5:]), dev))
    return out


@pytest.mark.parametrize("engine", ["ce", "sm"])
def test_copy_matrix_covers_every_ordered_gpu_pair(engine):
    cases = plans.copy_cases(dict(SYNTHETIC_2GPU, device=0))
    assert _pairs_covered(cases, engine, "uni") == {(0, 1), (1, 0)}
    # both ways at once, issued from each GPU
    bidir = {(int(c.params.get("device", 0)), c.kind) for c in cases
             if c.params.get("engine") == engine and c.params.get("direction") == "bidir" and "peer" in c.kind}
    assert bidir == {(0, "peer:1"), (1, "peer:0")}


def test_one_gpu_plans_have_no_peer_cases():
    fp = _one_gpu()
    for cases in (plans.copy_cases(fp), plans.pingpong_cases(fp), plans.latency_cases(fp)):
        assert not [c for c in cases if "peer" in c.case_id]


def test_default_plan_grows_only_by_multi_gpu_cases_with_two_gpus():
    one, two = plans.default_plan(_one_gpu()), plans.default_plan(SYNTHETIC_2GPU)
    extra = {c.case_id for c in two} - {c.case_id for c in one}
    # Peer-memory cases, and the one short NCCL case of the scale-out family (docs/scaleout.md).
    assert extra and all("peer" in x for x in extra if not x.startswith("nccl "))
    assert sum(x.startswith("nccl ") for x in extra) == 1
    assert len(extra) <= 40  # seconds each: the suite does not grow by minutes


def test_pingpong_and_chase_run_across_gpus():
    pp = [c for c in plans.pingpong_cases(SYNTHETIC_2GPU) if c.params.get("peer")]
    assert {c.kind for c in pp} == {"device", "peer:1", "pinned", "managed"}
    assert all(c.params["pair"] == "gpu-gpu" and c.params["device"] == "0" for c in pp)
    chase = [c for c in plans.latency_cases(SYNTHETIC_2GPU) if c.kind.startswith("peer:")]
    assert {(c.params["device"], c.kind) for c in chase} == {("0", "peer:1"), ("1", "peer:0")}


# --- --device / --devices / --placement ------------------------------------------------------------

def test_devices_all_runs_each_case_on_each_gpu_and_drops_self_peer():
    cases = [Case("gpu-stream", "device", {"bytes": "1GiB"}), Case("gpu-stream", "peer:1", {"bytes": "1GiB"}),
             Case("cpu-stream", "system", {"bytes": "1GiB"}),
             Case("copy", "device", {"dst": "peer:0", "device": "1"})]
    args = types.SimpleNamespace(device=0, devices="all", placement=None)
    fp, out = devices.select(SYNTHETIC_2GPU, args, cases)
    ids = [c.case_id for c in out]
    assert "gpu-stream device bytes=1GiB device=0" in ids and "gpu-stream device bytes=1GiB device=1" in ids
    assert "gpu-stream peer:1 bytes=1GiB device=0" in ids
    assert not any("peer:1" in i and "device=1" in i for i in ids)
    assert sum(i.startswith("cpu-stream") for i in ids) == 1
    assert sum(i.startswith("copy") for i in ids) == 1
    assert fp["devices"] == [0, 1] and fp["device"] == 0


def test_placement_sweep_runs_each_case_three_ways():
    out = devices.expand([Case("copy", "pinned", {"dst": "device"})], None, "sweep")
    assert sorted(c.params["placement"] for c in out) == ["local", "none", "remote"]


@pytest.mark.parametrize("text", ["2", "0,x", "-1", ""])
def test_bad_devices_are_usage_errors(text):
    from umscope.errors import UsageError
    with pytest.raises(UsageError):
        devices.parse_devices(text, SYNTHETIC_2GPU)


def test_bad_device_is_a_usage_error():
    from umscope.errors import UsageError
    with pytest.raises(UsageError, match="no such GPU"):
        devices.check_device(3, SYNTHETIC_2GPU)


def test_run_gpu_column_lists_the_measured_gpus(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    r1 = s.create_run("bench", "x", [], {}, dict(SYNTHETIC_2GPU, device=1, devices=[1]))
    r2 = s.create_run("bench", "x", [], {}, dict(SYNTHETIC_2GPU, device=0, devices=[0, 1]))
    r3 = s.create_run("bench", "x", [], {}, _one_gpu())
    gpu = {r["id"]: r["gpu"] for r in s.runs()}
    assert gpu[r1] == "1: NVIDIA H200"
    assert gpu[r2] == "0: NVIDIA H200, 1: NVIDIA H200"
    assert gpu[r3] == "NVIDIA H200"


# --- placement in umbench (CPU) --------------------------------------------------------------------

def _records(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l["type"] == "record"], lines[-1]


def test_every_record_carries_its_cpu_set_and_numa_node():
    import os
    node0 = topology.ranges(sorted(set(plans_node_cpus(0)) & os.sched_getaffinity(0)))
    res = umbench("run", "cpu-stream", "--kind", "numa:0", "--bytes", "1M", "--threads", "1", "--reps", "2")
    recs, status = _records(res)
    assert status["status"] == "ok", res.stdout + res.stderr
    assert recs and all(r["placement"] == "local" and r["numa_node"] == 0 and r["cpu_set"] == node0 for r in recs)
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "1M", "--threads", "1", "--reps", "2",
                  "--placement", "none")
    recs, status = _records(res)
    assert status["status"] == "ok" and all(r["placement"] == "none" and r["numa_node"] == -1 and r["cpu_set"]
                                            for r in recs)


def plans_node_cpus(node):
    from umscope.probe import numa_info
    return next(n["cpus"] for n in numa_info() if n["id"] == node)


def test_remote_placement_is_a_skip_with_its_reason_where_it_cannot_be():
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "1M", "--threads", "1", "--placement", "remote")
    _, status = _records(res)
    assert status["status"] == "skipped" and "remote placement needs a" in status["reason"]
    res = umbench("run", "cpu-stream", "--kind", "system", "--placement", "far")
    assert res.returncode == 2 and "--placement is local, remote or none" in res.stderr


# --- report ------------------------------------------------------------------------------------------

def test_topology_section_shows_links_measured_bandwidth_and_locality():
    recs = [  # synthetic copy records (test input)
        {"benchmark": "copy", "op": "ce-copy", "kind": "device", "unit": "GB/s", "median": 390.0,
         "extra": {"device": 0, "dst_kind": "peer:1", "direction": "uni"}},
        {"benchmark": "copy", "op": "sm-copy", "kind": "peer:0", "unit": "GB/s", "median": 370.0,
         "extra": {"device": 1, "dst_kind": "device", "direction": "uni"}},
    ]
    html = topology.section(SYNTHETIC_2GPU, recs)
    assert "NV18 (NVLink 4.0, NVSwitch)" in html
    assert "CE 390 GB/s, SM 370 GB/s (87% of 450)" in html  # GPU 0 -> 1, both engines
    assert "not measured in this run" in html  # GPU 1 -> 0
    assert "local CPUs" in html and "0-31" in html
    assert topology.section(_one_gpu(), []) .count("<h3>GPU ↔ CPU locality") == 1
    lines = topology.text_lines(SYNTHETIC_2GPU)
    assert any("GPU 0 -> GPU 1: NV18" in l and "bound 450 GB/s" in l for l in lines)


def test_placement_table_compares_local_and_none():
    recs = [{"benchmark": "copy", "op": "ce-copy", "processor": "ce0", "kind": "pinned", "bytes": 1 << 30,
             "unit": "GB/s", "median": m, "extra": {"placement": p, "cpu_set": c, "numa_node": n,
                                                     "dst_kind": "device", "route": "forward", "direction": "uni"}}
            for p, m, c, n in (("none", 55.0, "0-31", -1), ("local", 55.1, "0-31", 0))]
    html = topology.section(_one_gpu(), recs)
    assert "<h3>Placement" in html and "55 GB/s" in html and "55.1 GB/s" in html and "not run or skipped" in html
