import pytest

from umscope.errors import UsageError
from umscope.model import bounds

H200 = {"gpus": [{"name": "NVIDIA H200", "mem_clock_khz": 3201000, "mem_bus_bits": 6016, "addressing": "none",
                  "numa_id": -1, "link": {"pcie_gen_max": 5, "pcie_width_max": 16}}]}
GH200 = {"gpus": [{"name": "NVIDIA GH200 480GB", "mem_clock_khz": 2619000, "mem_bus_bits": 6144,
                   "addressing": "ATS", "numa_id": 1, "link": {}}]}


def _b(fp, **rec):
    rec.setdefault("unit", "GB/s")
    return bounds.bound(rec, fp, bounds.describe(fp))


def test_pcie_rates():
    assert bounds.pcie_gbps(5, 16) == 63.02
    assert bounds.pcie_gbps(4, 16) == 31.51
    assert bounds.pcie_gbps(None, 16) is None


def test_probe_fills_gpu_memory_and_link():
    d = bounds.describe(H200)["datapaths"]
    assert d["gpu_memory"][0] == pytest.approx(4814.3)
    assert d["h2d"][0] == 63.02 and "probe" in d["h2d"][1]
    assert "host_memory" not in d  # unknown for an x86 host unless a file says


def test_stream_bounds_by_location():
    assert _b(H200, benchmark="gpu-stream", op="copy", kind="device") == (pytest.approx(4814.3), "gpu_memory")
    assert _b(H200, benchmark="gpu-stream", op="read", kind="pinned") == (63.02, "h2d")
    assert _b(H200, benchmark="gpu-stream", op="copy", kind="pinned")[0] == pytest.approx(126.04)
    assert _b(H200, benchmark="gpu-stream", op="triad", kind="registered")[0] == pytest.approx(94.53)
    assert _b(H200, benchmark="gpu-stream", op="read", kind="managed", policy="first_touch=cpu")[1] == "gpu_memory"
    assert _b(H200, benchmark="gpu-stream", op="read", kind="managed",
              policy="advise=preferred:cpu+accessed_by:gpu")[1] == "h2d"
    none, why = _b(H200, benchmark="cpu-stream", op="read", kind="system")
    assert none is None and "host_memory" in why


def test_copy_bounds_count_traversals():
    assert _b(H200, benchmark="copy", op="ce-copy", kind="pinned", dst_kind="device")[0] == 63.02
    assert _b(H200, benchmark="copy", op="ce-copy", kind="device", dst_kind="device")[0] == pytest.approx(2407.15)
    # host -> host through the GPU crosses the link once each way: one link's rate
    assert _b(H200, benchmark="copy", op="ce-copy", kind="pinned", dst_kind="system")[0] == 63.02
    assert _b(H200, benchmark="copy", op="ce-copy", kind="pinned", dst_kind="device", route="both")[0] == 126.04


def test_packaged_gh200_description_and_gpu_numa_node():
    d = bounds.describe(GH200)
    assert d["name"].startswith("GH200")
    assert d["datapaths"]["host_memory"][0] == 500 and d["datapaths"]["h2d"][0] == 450
    # DDR -> DDR copies read and write LPDDR5: half of 500, the study's 250 GB/s (Fig. 3)
    assert _b(GH200, benchmark="copy", op="ce-copy", kind="numa:0", dst_kind="system") == (250, "host_memory")
    # DDR -> HBM: one C2C traversal, the study's 450 GB/s
    assert _b(GH200, benchmark="copy", op="ce-copy", kind="numa:0", dst_kind="numa:1") == (450, "h2d")
    # numa:1 is the GPU's node: reads stay in HBM
    assert _b(GH200, benchmark="gpu-stream", op="read", kind="numa:1")[1] == "gpu_memory"
    assert _b(GH200, benchmark="cpu-stream", op="read", kind="system")[0] == 500


def test_user_machine_file_overrides(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("name: mine\ndatapaths:\n  host_memory: 300\n  h2d: 50\n")
    d = bounds.describe(H200, str(f))
    assert d["name"] == "mine" and d["datapaths"]["h2d"][0] == 50 and d["datapaths"]["host_memory"][0] == 300
    assert d["datapaths"]["gpu_memory"][0] == pytest.approx(4814.3)
    with pytest.raises(UsageError):
        bounds.describe(H200, str(tmp_path / "missing.yaml"))
    assert bounds.describe(H200, "gh200")["datapaths"]["h2d"][0] == 450


def test_annotate_adds_efficiency():
    recs = [{"benchmark": "gpu-stream", "op": "read", "kind": "pinned", "unit": "GB/s", "median": 50.0}]
    bounds.annotate(recs, H200, bounds.describe(H200))
    assert recs[0]["bound"] == 63.02 and recs[0]["efficiency"] == pytest.approx(50 / 63.02, abs=1e-4)


def test_contention_bounds_follow_each_side():
    assert _b(H200, benchmark="contention", op="read", processor="gpu0", kind="pinned") == (63.02, "h2d")
    assert _b(H200, benchmark="contention", op="write", processor="gpu0", kind="pinned")[1] == "d2h"
    # The CPU side and the sum are limited by host memory, which an x86 probe cannot know.
    assert _b(H200, benchmark="contention", op="read", processor="cpu", kind="system")[0] is None
    gh = _b(GH200, benchmark="contention", op="sum", processor="gpu0+cpu", kind="pinned")
    assert gh[1] == "host_memory" and gh[0] > 0


def test_peer_gpu_bounds():
    # device -> peer: one traversal of the peer link (450 GB/s per direction in the H200 file).
    assert _b(H200, benchmark="copy", op="ce-copy", kind="device", dst_kind="peer:1") == (450.0, "peer_out")
    both = _b(H200, benchmark="copy", op="ce-copy", kind="peer:1", dst_kind="device", route="both")
    assert both[0] == 900.0 and both[1] in ("peer_in", "peer_out")
    # host -> peer crosses the other GPU's host link; SM reads of peer memory, the peer link.
    assert _b(H200, benchmark="copy", op="ce-copy", kind="pinned", dst_kind="peer:1") == (63.02, "h2d")
    assert _b(H200, benchmark="gpu-stream", op="read", kind="peer:1") == (450.0, "peer_in")
    # Within the other GPU: its memory for a copy engine, the link both ways for SMs.
    assert _b(H200, benchmark="copy", op="ce-copy", kind="peer:1", dst_kind="peer:1")[1] == "gpu_memory"
    assert _b(H200, benchmark="copy", op="sm-copy", kind="peer:1", dst_kind="peer:1")[0] == 450.0


def test_peer_kinds_in_the_plans():
    from umscope import plans
    fp = {"gpus": [{"device": 0}, {"device": 1}], "numa": []}
    assert plans.peer_kinds(fp) == ["peer:1"]
    ids = [c.case_id for c in plans.copy_cases(fp)]
    assert "copy device bytes=" in " ".join(ids) and any("dst=peer:1" in i for i in ids)
    for engine in ("ce", "sm"):  # one both-ways case for the pair per engine, issued from GPU 0
        assert sum("peer:1" in i and "bidir" in i and f"engine={engine}" in i for i in ids) == 1
    assert plans.peer_kinds({"gpus": [{"device": 0}]}) == []
