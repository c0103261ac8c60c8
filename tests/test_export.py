"""Exports, each checked against what its consumer expects."""

import csv
import io
import json

import pytest

from conftest import run_cli
from fleet_data import make_store
from umscope.export import FORMATS, export
from umscope.export.csv_wide import COLUMNS
from umscope.store import Store


@pytest.fixture
def two_runs(tmp_path):
    p = str(tmp_path / "s.sqlite")
    make_store(p, "node-a", n_records=12, job="123")
    make_store(p, "node-b", n_records=12, scale=0.5)
    return p


def read_nvbandwidth(doc):
    """A reader written to nvbandwidth's JSON output (json_output.cpp): {"nvbandwidth": {...,
    "testcases": [{"name", "status", "bandwidth_matrix": [[str]], "sum", ...}]}}; values are
    strings, "N/A" where a cell was not measured. Returns {testcase: [[float|None]]} of Passed ones."""
    root = doc["nvbandwidth"]
    assert isinstance(root["testcases"], list)
    out = {}
    for tc in root["testcases"]:
        assert set(tc) >= {"name", "status"}
        assert tc["status"] in ("Passed", "Waived", "Error", "Not Found", "Running")
        if tc["status"] != "Passed":
            continue
        assert isinstance(tc["bandwidth_description"], str) and tc["bandwidth_description"].endswith("(GB/s)")
        matrix = [[None if v == "N/A" else float(v) for v in row] for row in tc["bandwidth_matrix"]]
        assert all(isinstance(v, str) for row in tc["bandwidth_matrix"] for v in row)
        assert tc["sum"] == pytest.approx(sum(v for row in matrix for v in row if v is not None))
        out[tc["name"]] = matrix
    return out


def test_nvbandwidth_h2d_d2h_equal_the_records(two_runs):
    st = Store(two_runs)
    doc = json.loads(export(st, "nvbandwidth", 1))
    got = read_nvbandwidth(doc)
    recs = st.records(1)

    def median(src, dst, engine="ce", direction="uni", route="forward"):
        (r,) = [r for r in recs if r["benchmark"] == "copy" and r["kind"] == src and r["extra"]["dst_kind"] == dst
                and r["op"] == f"{engine}-copy" and r["extra"]["direction"] == direction
                and r["extra"]["route"] == route]
        return r["median"]

    assert got["host_to_device_memcpy_ce"] == [[pytest.approx(median("pinned", "device"), rel=1e-6)]]
    assert got["device_to_host_memcpy_ce"] == [[pytest.approx(median("device", "pinned"), rel=1e-6)]]
    assert got["host_to_device_bidirectional_memcpy_ce"][0][0] == pytest.approx(
        median("pinned", "device", direction="bidir"), rel=1e-6)
    assert got["device_to_host_bidirectional_memcpy_ce"][0][0] == pytest.approx(
        median("pinned", "device", direction="bidir", route="reverse"), rel=1e-6)
    assert got["host_to_device_memcpy_sm"][0][0] == pytest.approx(median("pinned", "device", engine="sm"), rel=1e-6)
    assert got["device_local_copy"][0][0] == pytest.approx(median("device", "device"), rel=1e-6)
    root = doc["nvbandwidth"]
    h2d = next(t for t in root["testcases"] if t["name"] == "host_to_device_memcpy_ce")
    assert h2d["bufferSize"] == 256 and h2d["testSamples"] == 20  # the real size (MiB) and repetitions
    assert root["Hostname"] == "node-a" and root["GPU Device list"][0].startswith("0: NVIDIA H100")
    waived = {t["name"] for t in root["testcases"] if t["status"] == "Waived"}
    assert "device_to_host_memcpy_sm" in waived
    # every other record is listed as waived with its reason: system memory, stream and latency records
    reasons = [w["reason"] for w in doc["umscope"]["waived"]]
    assert any("system -> device" in r for r in reasons) and any("not a copy" in r for r in reasons)
    assert len(doc["umscope"]["waived"]) + 6 == len(recs)


def test_nvbandwidth_needs_one_run(two_runs):
    res = run_cli("export", "--format", "nvbandwidth", "--store", two_runs)
    assert res.returncode == 2 and "--run" in res.stderr
    res = run_cli("export", "--format", "nvbandwidth", "--store", two_runs, "--run", "2")
    assert res.returncode == 0 and json.loads(res.stdout)["nvbandwidth"]["Hostname"] == "node-b"


def test_csv_has_the_distinguishing_columns(two_runs):
    res = run_cli("export", "--format", "csv", "--store", two_runs)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert list(rows[0]) == COLUMNS and len(rows) == 2 * 13  # 12 records + the skipped case, per run
    h2d = [r for r in rows if r["kind"] == "pinned" and r["destination_kind"] == "device" and r["engine"] == "sm"]
    assert [r["host"] for r in h2d] == ["node-a", "node-b"]
    assert h2d[0]["gpu"] == "NVIDIA H100 80GB HBM3" and h2d[0]["direction"] == "uni"
    assert float(h2d[0]["bound"]) == 64.0 and float(h2d[0]["efficiency"]) == pytest.approx(51 / 64, abs=1e-4)
    bidir = {r["route"] for r in rows if r["direction"] == "bidir"}
    assert bidir == {"forward", "reverse"}


def test_openmetrics_parses_with_prometheus_client(two_runs):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
    from prometheus_client.parser import text_string_to_metric_families as parse_prom
    text = export(Store(two_runs), "openmetrics")
    fams = {f.name: f for f in parse_om(text)}
    assert set(fams) >= {"umscope_bandwidth_bytes_per_second", "umscope_latency_seconds",
                         "umscope_efficiency_ratio", "umscope_run_info"}
    bw = [s for s in fams["umscope_bandwidth_bytes_per_second"].samples
          if s.labels.get("kind") == "pinned" and s.labels.get("dst_kind") == "device"
          and s.labels.get("op") == "ce-copy" and s.labels.get("direction") == "uni"]
    assert sorted((s.labels["host"], s.value) for s in bw) == [("node-a", 55e9), ("node-b", 27.5e9)]
    lat = fams["umscope_latency_seconds"].samples
    assert sorted(s.value for s in lat) == pytest.approx([600e-9, 1200e-9])
    info = {s.labels["run"]: s.labels for s in fams["umscope_run_info"].samples}
    assert info["1"]["job"] == "123" and info["1"]["scheduler"] == "slurm"
    # node_exporter's textfile collector reads the Prometheus text format: the same file parses there
    names = {f.name for f in parse_prom(text)}
    assert "umscope_bandwidth_bytes_per_second" in names
    assert " # " not in text.split("# EOF")[0].replace("\n# ", "\n")  # no timestamps, comments only as metadata


def _load_caliper_json(doc):
    """The Caliper json-split layout (cali-query's 'format json-split', read by Hatchet's CaliperReader):
    columns with column_metadata (is_value), nodes (label, column, parent before child), data rows whose
    'path' cell indexes the nodes; with node ordering, a 'Node order' column and row i for node i."""
    assert {"data", "columns", "column_metadata", "nodes"} <= set(doc)
    cols = doc["columns"]
    assert len(doc["column_metadata"]) == len(cols) and "path" in cols
    path = cols.index("path")
    assert not doc["column_metadata"][path]["is_value"]
    nodes = doc["nodes"]
    for i, n in enumerate(nodes):
        assert n["column"] == "path" and isinstance(n["label"], str)
        assert "parent" not in n or 0 <= n["parent"] < i
    order = cols.index("Node order") if "Node order" in cols else None
    for i, row in enumerate(doc["data"]):
        assert len(row) == len(cols) and 0 <= row[path] < len(nodes)
        if order is not None:
            assert row[order] == i == row[path]
    return cols, nodes


def test_caliper_json_split_with_fingerprint_metadata(two_runs):
    doc = json.loads(export(Store(two_runs), "caliper", 1))
    cols, nodes = _load_caliper_json(doc)
    assert "bandwidth_GBps" in cols and doc["hostname"] == "node-a" and doc["umscope.run"] == 1
    assert doc["scheduler.job"] == "123" and doc["gpu"] == "NVIDIA H100 80GB HBM3"
    paths = set()
    bw = cols.index("bandwidth_GBps")
    for row in doc["data"]:
        if row[bw] is None:
            continue
        names, i = [], row[cols.index("path")]
        while True:
            names.append(nodes[i]["label"])
            if "parent" not in nodes[i]:
                break
            i = nodes[i]["parent"]
        paths.add("/".join(reversed(names)))
    assert "umscope/copy/ce-copy/ce0 pinned -> device 256 MiB" in paths


def test_caliper_loads_in_hatchet_and_forms_a_thicket_ensemble(tmp_path):
    ht = pytest.importorskip("hatchet", reason="llnl-hatchet is not installed (pip install llnl-hatchet)")
    files = []
    for i in range(3):
        p = str(tmp_path / f"n{i}.sqlite")
        make_store(p, f"nid{i}", n_records=12, scale=1 + 0.1 * i, job="9")
        f = tmp_path / f"n{i}.json"
        f.write_text(export(Store(p), "caliper", 1))
        files.append(str(f))
    gf = ht.GraphFrame.from_caliper(files[0])
    df = gf.dataframe
    row = df[df["name"] == "ce0 pinned -> device 256 MiB"]
    assert row["bandwidth_GBps"].tolist() == [55.0]
    assert gf.metadata["hostname"] == "nid0" and gf.metadata["scheduler.job"] == "9"
    th = pytest.importorskip("thicket", reason="llnl-thicket is not installed")
    t = th.Thicket.from_caliper(files, disable_tqdm=True)
    assert sorted(t.metadata["hostname"]) == ["nid0", "nid1", "nid2"]
    assert set(t.metadata["scheduler.job"]) == {"9"}


def test_every_format_on_the_cli(two_runs, tmp_path):
    for fmt in [f for f in FORMATS if f != "perfetto"]:  # perfetto draws profile runs: tests/test_perfetto.py
        out = tmp_path / f"x.{fmt}"
        res = run_cli("export", "--format", fmt, "--store", two_runs, "--run", "1", "-o", str(out))
        assert res.returncode == 0, (fmt, res.stderr)
        assert out.stat().st_size > 100


def test_nvbandwidth_takes_pinned_memory_with_umbench_default_first_touch():
    # Real pinned records name umbench's default policy (first_touch=cpu): nvbandwidth's host buffers are
    # written by the CPU first too, so such a record is its testcase; another policy is not.
    from umscope.export.nvbandwidth import testcase_of
    base = {"benchmark": "copy", "status": "ok", "median": 55.0, "unit": "GB/s", "op": "ce-copy", "kind": "pinned",
            "extra": {"dst_kind": "device", "dst_policy": "", "direction": "uni", "route": "forward"}}
    assert testcase_of(dict(base, policy="first_touch=cpu"))[0] == "host_to_device_memcpy_ce"
    assert testcase_of(dict(base, policy=""))[0] == "host_to_device_memcpy_ce"
    assert testcase_of(dict(base, policy="first_touch=gpu"))[0] is None
    assert testcase_of(dict(base, policy="first_touch=cpu,page=thp"))[0] is None
