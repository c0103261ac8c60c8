"""The report's modelled section: apart from the measured ones, labelled, predictions beside measurements."""
from umscope.model import calibrated, dos
from umscope.report.html import render
from umscope.store import Store
from umscope.suite import Case

GPU = {"device": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sms": 132, "total_mem": 1 << 36,
       "l2_bytes": 50 << 20, "shared_per_sm": 228 << 10, "pci_bus_id": "0", "addressing": "none"}
FP = {"host": {"hostname": "h", "kernel": "6", "os": "Linux", "page_size": 4096, "thp": "madvise",
               "memory": {"MemTotal": 1 << 34}},
      "cpu": {"model": "x", "arch": "x86_64", "logical_cpus": 2, "sockets": 1, "caches": []},
      "numa": [{"id": 0, "mem_bytes": 1 << 34, "cpus": [0, 1]}], "cuda": {"runtime_version": 13000}, "gpus": [GPU]}
PHASES = dict(context_ms=100.0, alloc_ms=1.0, init_ms=30.0, transfer_ms=20.0, back_ms=40.0, free_ms=2.0)


def _app(mode, total, compute):
    return {"type": "record", "benchmark": "triad", "op": "app", "processor": "gpu0", "kind": "device", "policy": "",
            "bytes": 3 << 30, "metric": "time_per_iteration", "unit": "ms", "n": 4, "median": compute / 4,
            "min": compute / 4, "max": compute / 4, "spread": 0.0, "app": "triad", "mode": mode, "iterations": 4,
            "compute_ms": compute, "total_ms": total, "total_excl_init_ms": total - 30.0, "traffic_bytes": 3 << 30, **PHASES}


def _html(tmp_path, fp):
    s = Store(tmp_path / "m.sqlite")
    run = s.create_run("run", "umscope run", [], {}, fp)
    for mode, total, compute in (("explicit", 300.0, 100.0), ("managed", 900.0, 700.0)):
        s.add_case_result(run, Case("triad", None, {"mode": mode}), "ok", "", 0, 1, [_app(mode, total, compute)])
    s.finish_run(run, "complete")
    return render(s.run(run), s.cases(run), s.records(run))


def test_modelled_section_is_apart_and_labelled(tmp_path):
    html = _html(tmp_path, FP)
    sec = html.split('<h2 id=modelled>')[1].split("</section>")[0]
    assert "Modelled (not measured)" in sec and "border:2px dashed" in html.split('<h2 id=modelled>')[0][-400:]
    assert calibrated.VERSION in sec and "umscope measurement, nvidia-h100-x1" in sec
    fig, _ = dos.machine_figures("h100-sxm-pcie5")
    cal = dict(_app("explicit", 300.0, 100.0), data_bytes=3 << 30)
    p = calibrated.predict("triad", "managed", cal, fig)
    assert f"<td class=num>{p['total_ms']:.1f}</td><td class=num>900.0</td>" in sec
    assert f"{(p['total_ms'] - 900) / 900:+.1%}" in sec
    # The explicit case is the calibration: it is not predicted.
    assert "<td>explicit</td>" not in sec
    # The modelled frame comes after every measured section and before the list of skipped cases.
    assert html.index("id=modelled") > html.index('id="applications"')
    assert html.index("id=modelled") < html.index("<h2 id=skipped>")


def test_modelled_section_says_when_no_figures(tmp_path):
    html = _html(tmp_path, dict(FP, gpus=[dict(GPU, name="Some Other GPU")]))
    assert "No model figures for this GPU" in html
