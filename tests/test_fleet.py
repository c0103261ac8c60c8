"""Batch jobs and fleets: scheduler metadata, journal mode on network filesystems, merge, compare."""

import json
import os
import resource
import sqlite3
import time

import pytest

from conftest import run_cli
from fleet_data import make_store
from umscope import compare, netfs, probe, store as store_mod
from umscope.merge import merge
from umscope.store import Store


def test_slurm_job_metadata_is_recorded():
    env = {"SLURM_JOB_ID": "4242", "SLURM_CLUSTER_NAME": "alps", "SLURM_JOB_NODELIST": "nid[001-016]",
           "SLURM_PROCID": "3", "HOME": "/x"}
    s = probe.scheduler(env)
    assert s["name"] == "slurm" and s["job"] == "4242"
    assert s["vars"] == {k: v for k, v in env.items() if k != "HOME"}
    assert probe.scheduler({"FLUX_JOB_ID": "f1", "FLUX_TASK_RANK": "0"})["name"] == "flux"
    assert probe.scheduler({"PBS_JOBID": "7.pbs", "PBS_NODEFILE": "/n"})["job"] == "7.pbs"
    assert probe.scheduler({"PATH": "/bin"}) == {}


def test_scheduler_metadata_reaches_the_fingerprint(tmp_path):
    res = run_cli("info", "--json", env={"SLURM_JOB_ID": "99", "SLURM_CLUSTER_NAME": "c1", "SLURM_PROCID": "0"})
    assert res.returncode == 0, res.stderr
    sched = json.loads(res.stdout)["scheduler"]
    assert sched["name"] == "slurm" and sched["vars"]["SLURM_CLUSTER_NAME"] == "c1"


def test_network_filesystem_detection(monkeypatch):
    assert netfs.network_fs("/proc") is None  # procfs is local
    monkeypatch.setattr(netfs, "_statfs_type", lambda p: 0x6969)
    assert netfs.network_fs("/anything") == "nfs"
    monkeypatch.setattr(netfs, "_statfs_type", lambda p: 0xEF53)
    monkeypatch.setattr(netfs, "_mount_type", lambda p: "fuse.sshfs")
    assert netfs.network_fs("/anything") == "fuse.sshfs"
    monkeypatch.setattr(netfs, "_mount_type", lambda p: "ext4")
    assert netfs.network_fs("/anything") is None


def test_store_on_a_network_filesystem_uses_a_rollback_journal(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(netfs, "network_fs", lambda p: "lustre")
    monkeypatch.setattr(store_mod, "_warned_netfs", set())
    for name in ("a.sqlite", "b.sqlite"):
        s = Store(tmp_path / name)
        assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        s.close()
    err = capsys.readouterr().err
    assert err.count("network filesystem (lustre)") == 1  # said once
    monkeypatch.setattr(netfs, "network_fs", lambda p: None)
    s = Store(tmp_path / "c.sqlite")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _count(path, table):
    db = sqlite3.connect(path)
    n = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    db.close()
    return n


def test_merge_of_16_stores_loses_no_record(tmp_path):
    paths = []
    for i in range(16):
        p = str(tmp_path / f"node{i:02d}.sqlite")
        make_store(p, f"nid{i:03d}", n_records=40 + i, job="77")
        make_store(p, f"nid{i:03d}", n_records=5)  # two runs in some stores: ids collide across stores
        paths.append(p)
    want_recs = sum(_count(p, "records") for p in paths)
    want_cases = sum(_count(p, "cases") for p in paths)
    out = str(tmp_path / "all.sqlite")
    t = merge(out, paths, progress=False)
    assert t["runs"] == 32 and t["records"] == want_recs
    assert _count(out, "records") == want_recs and _count(out, "cases") == want_cases
    st = Store(out)
    runs = st.runs()
    assert [r["id"] for r in runs] == list(range(1, 33))  # renumbered
    r = st.run(runs[4]["id"])
    assert r["options"]["merged_from"]["store"].endswith("node02.sqlite")
    assert r["fingerprint"]["scheduler"]["job"] == "77"
    # every record lands with its own run: per-run counts match the sources
    src_counts = sorted(_count(p, "records") for p in paths)
    assert len(st.records(runs[0]["id"])) + len(st.records(runs[1]["id"])) == src_counts[0]
    st.close()
    # merging again adds nothing
    t2 = merge(out, paths, progress=False)
    assert t2["runs"] == 0 and t2["skipped_runs"] == 32 and _count(out, "records") == want_recs


def test_merge_cli_refuses_bad_sources_before_writing(tmp_path):
    a = str(tmp_path / "a.sqlite")
    make_store(a, "n1", n_records=3)
    out = tmp_path / "out.sqlite"
    res = run_cli("merge", str(out), a, str(tmp_path / "missing.sqlite"))
    assert res.returncode == 2 and "no store at" in res.stderr and not out.exists()
    res = run_cli("merge", str(out), a)
    assert res.returncode == 0 and "merged 1 run(s), 4 record(s) from 1 store(s)" in res.stdout


def test_compare_matches_cases_and_flags_the_slow_node(tmp_path):
    paths = []
    for i in range(16):
        p = str(tmp_path / f"n{i}.sqlite")
        make_store(p, f"nid{i:03d}", n_records=30, scale=0.93 if i == 5 else 1.0 + 0.001 * (i - 8))
        paths.append(p)
    runs = compare.load(paths, [])
    res = compare.compare(runs, threshold=0.05)
    h2d = next(r for r in res["rows"] if r["key"]["kind"] == "pinned" and r["key"].get("dst_kind") == "device"
               and r["key"]["op"] == "ce-copy" and r["key"].get("direction") == "uni")
    assert all(v is not None for v in h2d["values"]) and len(h2d["values"]) == 16
    assert h2d["flagged"] == [5]
    texts = [f["text"] for f in res["flags"]]
    assert any(t.startswith("nid005 #1 (store 6): copy ce-copy ce0 pinned -> device 256 MiB") and
               "7% under the median of 16 runs" in t for t in texts), texts
    # the latency row: slower means over, and it is the worse direction
    lat = [f for f in res["flags"] if "latency" in f["case"]]
    assert lat and all(f["worse"] and "over" in f["text"] for f in lat)
    assert all(f["run"].startswith("nid005") for f in res["flags"])


def test_compare_baseline_and_published_values_stay_apart(tmp_path):
    a, b = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    make_store(a, "gh1", n_records=20, gpu="NVIDIA GH200 480GB")
    make_store(b, "gh2", n_records=20, scale=1.1, gpu="NVIDIA GH200 480GB")
    refs = compare.load_reference(["GH200"])
    assert refs and all(r["cite"] and r["figure"] for r in refs)
    runs = compare.load([a, b], ["1:1", "2:1"])
    res = compare.compare(runs, baseline=runs[0].label, threshold=0.05, reference=refs)
    h2d = next(r for r in res["rows"] if r["key"]["kind"] == "pinned" and r["key"].get("dst_kind") == "device"
               and r["key"].get("direction") == "uni" and r["key"]["op"] == "ce-copy")
    assert h2d["ratios"] == [1.0, 1.1]
    pubs = {(p["value"], p["cite"].split(",")[0]) for p in h2d["published"]}
    assert (415.7, "L. Fusco") in pubs and (375, "G. Schieffer") in pubs
    assert h2d["values"] == [55.0, 55.0 * 1.1]  # published values never enter the measured figures
    from umscope.report.compare import render
    page = render(res)
    assert "published" in page and "Fig. 5" in page and "415.7" in page


def test_compare_cli_two_stores_of_200_records_under_2_seconds(tmp_path):
    a, b = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    make_store(a, "node-a", n_records=200)
    make_store(b, "node-b", n_records=200, scale=0.9)
    out = tmp_path / "cmp.html"
    # In process: reading both stores, matching, flagging and rendering the page.
    t0 = time.perf_counter()
    from umscope.report.compare import write_compare_report
    write_compare_report(compare.compare(compare.load([a, b], []), reference=compare.load_reference()),
                         tmp_path / "inproc.html")
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"compare took {elapsed:.2f} s"
    # The command as a user runs it: its CPU time (wall time on a loaded CI machine is not its own).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_cli("compare", "--store", a, "--store", b, "-o", str(out))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 2.0, f"umscope compare used {cpu:.2f} s of CPU"
    page = out.read_text()
    assert page.count("<tr>") >= 200 and "node-a #1 (store 1)" in page and "node-b #1 (store 2)" in page
    # of two runs the median is their mean: each is 5.3% off it
    assert "node-b #1 (store 2): copy ce-copy ce0 pinned -> device 256 MiB 5% under the median of 2 runs" in res.stdout
    assert "node-a #1 (store 1): copy ce-copy ce0 pinned -> device 256 MiB 5% over the median of 2 runs" in res.stdout


def test_compare_bad_input_is_one_line_and_exit_2(tmp_path):
    a = str(tmp_path / "a.sqlite")
    make_store(a, "n", n_records=3)
    for args, msg in [(["compare", "--store", a, "7"], "no run 7"),
                      (["compare", "--store", a, "--store", a, "1"], "STORE:ID"),
                      (["compare", "--store", str(tmp_path / "none.sqlite")], "no store at"),
                      (["compare", "--store", a, "--baseline", "zz"], "--baseline")]:
        res = run_cli(*args)
        assert res.returncode == 2 and msg in res.stderr, (args, res.stderr)
        assert res.stderr.count("\n") == 1
    assert not (tmp_path / "none.sqlite").exists()


def _node_store(path, host, h2d=1.0, latency=1.0):
    """A node's store: fleet_data's run with the pinned -> device copy (55 GB/s) and the latency (600 ns)
    scaled by the given factors."""
    make_store(path, host, n_records=20)
    db = sqlite3.connect(path)
    db.execute("UPDATE records SET median = median * ? WHERE benchmark = 'copy' AND median = 55.0", (h2d,))
    db.execute("UPDATE records SET median = median * ? WHERE benchmark = 'latency'", (latency,))
    db.commit()
    db.close()


H2D = "copy ce-copy ce0 pinned -> device 256 MiB"


@pytest.mark.parametrize("how", ["run", "file", "median"])
def test_gate_fails_a_figure_10_percent_low_and_passes_4_percent(tmp_path, how):
    ref = str(tmp_path / "ref.sqlite")
    _node_store(ref, "ref")
    for factor, code in ((0.90, 1), (0.96, 0)):
        node = str(tmp_path / f"node{factor}.sqlite")
        _node_store(node, "nid007", h2d=factor)
        if how == "run":  # a reference run: run 1 of the first store
            args = ["--store", ref, "--store", node, "--baseline", "1:1"]
            against = "baseline ref #1 (store 1)"
        elif how == "file":  # a stored baseline file, written from the reference store
            base = tmp_path / "base.json"
            res = run_cli("compare", "--store", ref, "--save-baseline", str(base), "-o", str(tmp_path / "c.html"))
            assert res.returncode == 0 and "figure(s) (median) written to" in res.stderr, res.stderr
            args = ["--store", node, "--baseline", str(base)]
            against = f"baseline file {base}"
        else:  # the fleet median of four good nodes and this one
            fleet = [str(tmp_path / f"f{i}.sqlite") for i in range(4)]
            for i, p in enumerate(fleet):
                _node_store(p, f"nid00{i}", h2d=1.0 + 0.002 * i)
            args = sum((["--store", p] for p in fleet), []) + ["--store", node]
            against = "the median of 5 runs"
        res = run_cli("compare", *args, "--fail-over", "0.05", cwd=tmp_path)
        assert res.returncode == code, (factor, res.stdout, res.stderr)
        last = res.stdout.strip().splitlines()
        if code:
            assert last[-2].startswith("gate: FAIL: 1 of ") and "by more than 5%" in last[-2], last[-2:]
            assert last[-1].startswith("  nid007 #1") and f"{H2D} 10% under {against}" in last[-1], last[-1]
            assert "49.5 against 55" in last[-1], last[-1]
        else:
            assert last[-1].startswith("gate: pass: ") and "within 5%" in last[-1], last[-1]
        assert not (tmp_path / "umscope-compare.html").exists()  # a gate writes no page unless asked


def test_gate_judges_the_worse_direction_of_each_metric(tmp_path):
    ref, node = str(tmp_path / "ref.sqlite"), str(tmp_path / "node.sqlite")
    _node_store(ref, "ref")
    # faster copies and shorter latency are no failure, though they are flagged as strays
    _node_store(node, "nid007", h2d=1.2, latency=0.8)
    res = run_cli("compare", "--store", ref, "--store", node, "--baseline", "1:1", "--fail-over", "0.05", "--json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["gate"]["passed"] and out["gate"]["failures"] == [] and len(out["flags"]) == 2
    assert "gate: pass: 20 figure(s)" in res.stderr
    # longer latency is
    _node_store(node := str(tmp_path / "slow.sqlite"), "nid008", latency=1.1)
    res = run_cli("compare", "--store", ref, "--store", node, "--baseline", "1:1", "--fail-over", "0.05", "--json",
                  cwd=tmp_path)
    assert res.returncode == 1
    fails = json.loads(res.stdout)["gate"]["failures"]
    assert [(f["case"], f["value"], f["baseline"]) for f in fails] == [("latency chase gpu0 device 1 GiB", 660.0, 600.0)]
    assert "10% over baseline ref #1 (store 1): 660 against 600 ns" in res.stderr


def test_gate_bad_input_is_one_line_and_exit_2(tmp_path):
    a, b = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    make_store(a, "n", n_records=3)
    make_store(b, "m", n_records=3)
    (tmp_path / "bad.json").write_text("{}")
    for args, msg in [(["--store", a, "--store", b, "--fail-over", "0"], "--fail-over is a fraction"),
                      (["--store", a, "--store", b, "--fail-over", "-0.1"], "--fail-over is a fraction"),
                      (["--store", a, "--store", b, "--fail-over", "5%"], "--fail-over"),
                      (["--store", a, "--fail-over", "0.05"], "needs two runs or more"),
                      (["--store", a, "--baseline", str(tmp_path / "none.json"), "--fail-over", "0.05"],
                       "cannot read baseline file"),
                      (["--store", a, "--baseline", str(tmp_path / "bad.json"), "--fail-over", "0.05"],
                       "not a umscope baseline file"),
                      (["--store", a, "--store", b, "--baseline", "3:1", "--fail-over", "0.05"], "--baseline")]:
        res = run_cli("compare", *args, cwd=tmp_path)
        assert res.returncode == 2 and msg in res.stderr, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir() if ".sqlite" not in p.name) == ["bad.json"]


def test_gate_baseline_file_is_read_by_the_input_reader(tmp_path):
    """--baseline FILE goes through inputs.py like every other file input: a FIFO nobody writes to does not hang,
    and a non-finite value is refused in one line."""
    a = str(tmp_path / "a.sqlite")
    make_store(a, "n", n_records=3)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    (tmp_path / "inf.json").write_text('{"cases": [{"key": {}, "value": Infinity}]}')
    for path, msg in [(fifo, "not a umscope baseline file"), (tmp_path / "inf.json", "not a finite number")]:
        res = run_cli("compare", "--store", a, "--baseline", str(path), "--fail-over", "0.05", cwd=tmp_path,
                      timeout=60)
        assert res.returncode == 2 and msg in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1
