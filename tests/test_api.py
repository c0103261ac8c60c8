"""The Python API: open_store, probe, run_plan."""

import pytest

import umscope
from umscope.errors import UsageError
from fleet_data import make_store


def test_open_store_reads_without_creating(tmp_path):
    missing = tmp_path / "nope" / "s.sqlite"
    with pytest.raises(UsageError, match="no store at"):
        umscope.open_store(missing)
    assert not missing.parent.exists()
    p = str(tmp_path / "s.sqlite")
    make_store(p, "node-a", n_records=10, job="5")
    with umscope.open_store(p) as st:
        runs = st.runs
        assert len(runs) == 1 and runs[0]["hostname"] == "node-a"
        assert runs[0]["fingerprint"]["scheduler"]["job"] == "5"
        recs = st.records(runs[0]["id"])
        assert len(recs) == 11 and recs[0]["extra"]["dst_kind"] == "device"


def test_dataframe_has_records_and_their_extra(tmp_path):
    pd = pytest.importorskip("pandas")
    p = str(tmp_path / "s.sqlite")
    make_store(p, "node-a", n_records=10)
    df = umscope.open_store(p).dataframe()
    assert isinstance(df, pd.DataFrame) and len(df) == 11
    h2d = df[(df.kind == "pinned") & (df.dst_kind == "device") & (df.op == "ce-copy") & (df.direction == "uni")]
    assert h2d["median"].tolist() == [55.0] and h2d["host"].tolist() == ["node-a"]
    assert h2d["efficiency"].tolist() == [pytest.approx(55 / 64, abs=1e-4)]


def test_probe_is_callable_and_still_the_module():
    fp = umscope.probe()
    assert fp["host"]["hostname"] and "scheduler" in fp and "cublas" in fp["cuda"]
    assert umscope.probe.cuda_version_text(13000) == "13.0"  # the module's functions stay reachable


def test_run_plan_runs_a_family_into_a_store(tmp_path):
    p = str(tmp_path / "api.sqlite")
    res = umscope.run_plan("cpu-stream", store=p, kinds=["system"], sizes="16M", threads="1", reps=3, label="api")
    assert res["status"] == "complete"
    ops = sorted(r["op"] for r in res["records"] if r["status"] == "ok")
    assert ops == ["copy", "read", "write"]
    with umscope.open_store(p) as st:
        assert st.run(res["run"])["label"] == "api"
        assert all(r["median"] > 0 for r in st.records(res["run"]))


def test_run_plan_refuses_an_unknown_family(tmp_path):
    with pytest.raises(Exception, match="unknown benchmark family"):
        umscope.run_plan("nope", store=str(tmp_path / "x.sqlite"))
    assert not (tmp_path / "x.sqlite").exists()
