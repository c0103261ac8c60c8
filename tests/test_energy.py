"""The energy of each case (umscope.energy, issue 40): counter differences from a fake NVML and a fake
powercap/hwmon tree, RAPL's wrap-around, unreadable sources recorded with their reason (never as 0), the note
of a case too short for the counters, GFLOP/s per watt, and the suite reading around each case of a batch at
its markers. About 6 s (selftest cases that sleep)."""
import json
import pathlib
import time

import pytest

from umscope import energy, nvml, suite
from umscope.store import Store
from umscope.suite import Case

WATTS = 300.0  # the fake GPU's constant power
OPTIONS = {"device": 0, "reps": None, "warmup": None}


class _FakeNvml:
    """The pynvml calls energy.Meter makes: GPUs whose energy counter grows at WATTS (or a value set by hand)."""
    NVMLError = type("NVMLError", (Exception,), {})

    def __init__(self, count=2, counter=None, limit_mw=700000, default_mw=700000):
        self.count, self.counter, self.limit, self.default = count, counter, limit_mw, default_mw

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        if i >= self.count:
            raise self.NVMLError("no such GPU")
        return i

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if self.counter is not None:
            return self.counter[h]
        return int(WATTS * time.monotonic() * 1000) + h  # mJ

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.limit

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self.default


@pytest.fixture
def fake_nvml(monkeypatch):
    def use(fake):
        monkeypatch.setattr(nvml, "_init", lambda: (fake, "") if fake else (None, "nvidia-ml-py is not installed"))
        nvml._handle.cache_clear()
        nvml._default_limit.cache_clear()
        return fake
    yield use
    nvml._handle.cache_clear()
    nvml._default_limit.cache_clear()


def _rapl(root, n, uj, max_uj=262143328850, name=None):
    d = root / "sys/class/powercap" / f"intel-rapl:{n}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(f"{name or f'package-{n}'}\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    sub = root / "sys/class/powercap" / f"intel-rapl:{n}:0"  # a subdomain (core/dram): inside the package
    sub.mkdir(exist_ok=True)
    (sub / "name").write_text("dram\n")
    (sub / "energy_uj").write_text("5\n")
    return d


def _pair(meter, change, seconds=2.0):
    """Two snapshots `seconds` apart (by their clock), `change()` applied between them."""
    a = meter.snapshot()
    change()
    b = meter.snapshot()
    b["t"] = a["t"] + seconds
    return a, b


def test_gpu_energy_is_the_counter_difference_labelled_with_the_power_limit(fake_nvml, tmp_path):
    fake = fake_nvml(_FakeNvml(count=2, counter=[1000000, 5000000], limit_mw=650000, default_mw=700000))
    m = energy.Meter(tmp_path)
    a, b = _pair(m, lambda: fake.counter.__setitem__(0, 1000000 + 400500))  # GPU 0: 400.5 J more; GPU 1: none
    w = energy.window(a, b, {0}, "test window")
    g0, g1 = w["sources"]["gpu0"], w["sources"]["gpu1"]
    assert g0["joules"] == pytest.approx(400.5) and g0["watts"] == pytest.approx(200.25)
    assert g0["used"] and not g1["used"] and g1["joules"] == 0  # a GPU the case did not use: measured, not counted
    assert (g0["power_limit_w"], g0["default_power_limit_w"]) == (650.0, 700.0)
    assert w["gpu_joules"] == pytest.approx(400.5) and w["gpu_watts"] == pytest.approx(200.25) and w["gpus"] == [0]
    assert w["wall_s"] == 2.0 and w["window"] == "test window" and "note" not in w
    assert "nvmlDeviceGetTotalEnergyConsumption" in g0["name"]
    every = energy.window(a, b, None)  # GPUs unknown: every GPU counts
    assert every["gpus"] == [0, 1] and every["gpu_joules"] == pytest.approx(400.5)


def test_rapl_packages_and_their_wrap_around(fake_nvml, tmp_path):
    fake_nvml(None)
    top = 1000000000
    p0 = _rapl(tmp_path, 0, top - 3000000, max_uj=top)  # 3 J before the wrap
    p1 = _rapl(tmp_path, 1, 10000000)
    m = energy.Meter(tmp_path)
    assert [d.name for d in m.rapl] == ["intel-rapl:0", "intel-rapl:1"]  # not the subdomains

    def change():
        (p0 / "energy_uj").write_text("2000000\n")  # wrapped: 3 J to the top and 2 J after it
        (p1 / "energy_uj").write_text("70000000\n")
    w = energy.window(*_pair(m, change))
    assert w["sources"]["rapl:package-0"]["joules"] == pytest.approx(5.0)
    assert w["sources"]["rapl:package-1"]["joules"] == pytest.approx(60.0)
    assert w["sources"]["rapl:package-1"]["watts"] == pytest.approx(30.0)
    assert "intel-rapl:0/energy_uj" in w["sources"]["rapl:package-0"]["name"]
    # No GPU: recorded as absent with NVML's reason, no GPU total.
    assert w["sources"]["gpu"]["joules"] is None and "not installed" in w["sources"]["gpu"]["reason"]
    assert "gpu_joules" not in w


def test_unreadable_sources_are_absent_with_their_reason_never_zero(fake_nvml, tmp_path, monkeypatch):
    fake_nvml(_FakeNvml(count=1))
    _rapl(tmp_path, 0, 5)
    locked = tmp_path / "sys/class/powercap/intel-rapl:0/energy_uj"
    real = pathlib.Path.read_text

    def read_text(self, *a, **k):  # the tests run as root, who reads a mode-000 file: the kernel's answer, faked
        if self == locked:
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)
    monkeypatch.setattr(pathlib.Path, "read_text", read_text)
    m = energy.Meter(tmp_path)
    w = energy.window(*_pair(m, lambda: None))
    rapl = w["sources"]["rapl:package-0"]
    assert rapl["joules"] is None and "readable by root only" in rapl["reason"] and "CVE-2020-8694" in rapl["reason"]
    hw = w["sources"]["hwmon"]
    assert hw["joules"] is None and "no energy counter or power sensor" in hw["reason"]
    assert "watts" not in rapl and "watts" not in hw
    # No powercap tree at all: one absent source saying so.
    w = energy.window(*_pair(energy.Meter(tmp_path / "elsewhere"), lambda: None))
    assert w["sources"]["rapl"]["joules"] is None and "no /sys/class/powercap" in w["sources"]["rapl"]["reason"]
    # A counter that goes back without a wrap range (a driver reload): absent, not negative.
    fake = fake_nvml(_FakeNvml(count=1, counter=[5000]))
    a, b = _pair(energy.Meter(tmp_path), lambda: fake.counter.__setitem__(0, 1000))
    g = energy.window(a, b)["sources"]["gpu0"]
    assert g["joules"] is None and "backwards" in g["reason"]


def test_a_case_under_half_a_second_gets_a_note_not_a_figure(fake_nvml, tmp_path):
    fake = fake_nvml(_FakeNvml(count=1, counter=[0]))
    a, b = _pair(energy.Meter(tmp_path), lambda: fake.counter.__setitem__(0, 30000), seconds=0.2)
    w = energy.window(a, b, {0})
    assert "0.20 s" in w["note"] and "resolution" in w["note"]
    assert w["sources"]["gpu0"]["joules"] is None and "resolution" in w["sources"]["gpu0"]["reason"]
    assert "gpu_joules" not in w and "gpu_watts" not in w
    pw = energy.per_watt({"processor": "gpu0", "gflops": 1000.0, "compute_ms": 100}, w)
    assert pw["value"] is None and "resolution" in pw["reason"]


def test_gflops_per_watt_of_a_gpu_application(fake_nvml, tmp_path):
    fake = fake_nvml(_FakeNvml(count=2, counter=[0, 0], limit_mw=700000))
    a, b = _pair(energy.Meter(tmp_path), lambda: fake.counter.__setitem__(1, 800000), seconds=4.0)  # 200 W
    w = energy.window(a, b, {1})
    gemm = {"op": "app", "processor": "gpu1", "gflops": 50000.0, "compute_ms": 3000.0}
    himeno = {"op": "app", "processor": "gpu1", "gflops": 2000.0}
    cpu = {"op": "app", "processor": "cpu", "gflops": 100.0}
    stream = {"op": "read", "processor": "gpu1", "median": 3000.0}
    energy.attach([gemm, himeno, cpu, stream], w)
    assert gemm["gflops_per_watt"]["value"] == pytest.approx(250.0)
    assert gemm["gflops_per_watt"]["power_limit_w"] == 700.0 and gemm["gflops_per_watt"]["watts"] == 200.0
    assert gemm["gflops_per_watt"]["compute_share"] == pytest.approx(0.75)  # 3 s of compute in a 4 s window
    assert himeno["gflops_per_watt"]["value"] == pytest.approx(10.0) and "compute_share" not in himeno["gflops_per_watt"]
    assert "gflops_per_watt" not in cpu and "gflops_per_watt" not in stream  # no GPU, or no FLOP rate
    # 1 s of compute in a 4 s case: the case's average power is mostly the setup's, so no figure, and why.
    short = energy.per_watt({"processor": "gpu1", "gflops": 50000.0, "compute_ms": 1000.0}, w)
    assert short["value"] is None and "25% of the case" in short["reason"] and short["compute_share"] == 0.25
    assert all(r["energy"] is w for r in (gemm, himeno, cpu, stream))


def test_hwmon_energy_counters_and_power_meters_integrated(fake_nvml, tmp_path):
    """An energy*_input counter is a difference; a power-only sensor (Grace Hopper's ACPI power meter: 100 W
    here) is integrated by the meter's thread: 100 W over the window."""
    fake_nvml(None)
    hw = tmp_path / "sys/class/hwmon/hwmon0"
    hw.mkdir(parents=True)
    (hw / "energy1_input").write_text("1000000\n")
    (hw / "energy1_label").write_text("Socket 0\n")
    meter_dir = tmp_path / "sys/class/hwmon/hwmon1/device"
    meter_dir.mkdir(parents=True)
    (meter_dir / "power1_oem_info").write_text("Module Power Socket 0\n")
    (meter_dir / "power1_average").write_text("100000000\n")
    (meter_dir / "power1_average_interval").write_text("50\n")
    m = energy.Meter(tmp_path).start()
    try:
        a = m.snapshot()
        (hw / "energy1_input").write_text("9000000\n")
        time.sleep(0.6)
        b = m.snapshot()
    finally:
        m.stop()
    w = energy.window(a, b)
    assert w["sources"]["hwmon:Socket 0"]["joules"] == pytest.approx(8.0)
    mod = w["sources"]["hwmon-power:Module Power Socket 0"]
    assert mod["joules"] == pytest.approx(100.0 * w["wall_s"], rel=0.02) and mod["watts"] == pytest.approx(100.0, rel=0.02)
    assert "integrated every 100 ms" in mod["name"]
    # Not running: absent with the reason (never the integral's 0).
    later = energy.window(m.snapshot(), m.snapshot())["sources"]["hwmon-power:Module Power Socket 0"]
    assert later["joules"] is None and "only while the meter runs" in later["reason"]


def test_a_failing_source_is_recorded_and_the_batch_goes_on(fake_nvml, tmp_path, monkeypatch):
    """A reading that raises (here NVML's limits) is recorded as the meter's failure with its reason: the batch's
    output reader, which takes the readings, keeps reading (else the batch would wait for its timeout)."""
    fake_nvml(_FakeNvml(count=1))
    monkeypatch.setattr(nvml, "power_limits_w", lambda i: 1 / 0)
    m = energy.Meter(tmp_path)
    out = list(suite.execute_batch([Case("selftest", None, {"mode": "ok"}, timeout=5)] * 2, OPTIONS, meter=m))
    assert [o.status for _, o in out] == ["ok", "ok"]
    w = energy.window(*out[0][1].energy)
    assert w["sources"]["meter"]["joules"] is None and "ZeroDivisionError" in w["sources"]["meter"]["reason"]


def test_the_output_reader_ends_quietly_when_the_suite_closes_the_pipe(fake_nvml, tmp_path):
    """A signal ends the run while the reader takes a marker's reading: the suite closes the pipe, and the reader's
    next read fails. It ends with its end-of-output item, without a traceback on the user's terminal."""
    import queue

    def stream():
        yield '{"type":"case","event":"start","index":0}\n'
        raise ValueError("I/O operation on closed file.")
    fake_nvml(_FakeNvml(count=1))
    q = queue.Queue()
    suite._reader(stream(), q, energy.Meter(tmp_path))
    items = [q.get_nowait() for _ in range(q.qsize())]
    assert [i[0] for i in items] == ['{"type":"case","event":"start","index":0}\n', None]
    assert "gpu0" in items[0][1]["sources"]
    assert items[1][1] is None  # the suite reads the meter itself where a batch ends (execute_batch's to_now)


def test_the_gpus_a_case_uses():
    opts = {"device": None}
    assert energy.gpus_of(Case("gpu-stream", "device", {}), opts) == {0}
    assert energy.gpus_of(Case("gpu-stream", "device", {}), {"device": 2}) == {2}
    assert energy.gpus_of(Case("copy", "peer:3", {"dst": "device", "device": "1"}), opts) == {1, 3}
    assert energy.gpus_of(Case("copy", "device", {"dst": "peer:2"}), opts) == {0, 2}
    assert energy.gpus_of(Case("pingpong", "device", {"pair": "gpu-gpu", "peer": "1", "device": "0"}), opts) == {0, 1}
    assert energy.gpus_of(Case("app", None, {"name": "gemm", "place-a": "peer:1"}), opts) == {0, 1}
    assert energy.gpus_of(Case("nccl", "device", {}), opts) is None
    assert energy.gpus_of(Case("nccl", "device", {"gpus": "0,2"}), opts) == {0, 2}
    assert energy.gpus_of(Case("mpi", "device", {}, launch=["mpirun", "-n", "2"]), opts) is None



def test_a_batch_case_is_read_at_its_own_markers(fake_nvml, tmp_path):
    """While the suite is busy with one case's result (1 s here), the batch runs the next case: that case's
    window is still its own (from its markers, about its 0.7 s sleep), not the suite's delay."""
    fake_nvml(_FakeNvml(count=1))
    m = energy.Meter(tmp_path)
    cases = [Case("selftest", None, {"mode": "sleep", "ms": "600"}), Case("selftest", None, {"mode": "sleep", "ms": "700"})]
    out = []
    for case, outcome in suite.execute_batch(cases, OPTIONS, meter=m):
        out.append(outcome)
        time.sleep(1.0)
    (a0, b0, where0), (a1, b1, where1) = (o.energy for o in out)
    assert "first case of a batch" in where0 and "inside a batch" in where1
    w0, w1 = energy.window(a0, b0, {0}, where0), energy.window(a1, b1, {0}, where1)
    assert 0.59 <= w0["wall_s"] < 3 and 0.69 <= w1["wall_s"] < 3
    assert a1["t"] >= b0["t"]  # the windows do not overlap
    for w in (w0, w1):
        assert w["gpu_watts"] == pytest.approx(WATTS, rel=0.05)


def test_one_reading_between_two_cases_of_a_batch(fake_nvml, tmp_path, monkeypatch):
    """A start marker right after an end marker shares its reading: on 4 x H100 a reading is 12 NVML calls, and
    the suite took two at every boundary between cases (b447ae0: 20 ms between batched cases). The windows of
    consecutive cases meet; a batch's first case is read at its own start marker."""
    fake_nvml(_FakeNvml(count=4))
    m = energy.Meter(tmp_path)
    taken = []
    real = m.snapshot
    monkeypatch.setattr(m, "snapshot", lambda: taken.append(1) or real())
    cases = [Case("selftest", None, {"mode": "sleep", "ms": "200"}) for _ in range(3)]
    out = [o for _, o in suite.execute_batch(cases, OPTIONS, meter=m)]
    assert [o.status for o in out] == ["ok"] * 3
    assert len(taken) == 1 + 1 + 3  # the batch's stamp, the first start marker, each end marker
    (a0, b0, _), (a1, b1, _), (a2, b2, _) = (o.energy for o in out)
    assert a1 is b0 and a2 is b1 and a0["t"] < b0["t"] < b1["t"] < b2["t"]
    for a, b in ((a0, b0), (a1, b1), (a2, b2)):
        assert 0.19 <= b["t"] - a["t"] < 3


def test_the_default_power_limit_is_read_once_the_limit_at_every_reading(fake_nvml, tmp_path):
    """The board's default limit is a constant: read once per GPU; the limit in force at every reading."""
    fake = fake_nvml(_FakeNvml(count=2))
    asked = []
    for name in ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementDefaultLimit"):
        real = getattr(fake, name)
        setattr(fake, name, lambda h, real=real, name=name: asked.append(name) or real(h))
    m = energy.Meter(tmp_path)
    a = m.snapshot()
    fake.limit = 450000
    b = m.snapshot()
    assert asked.count("nvmlDeviceGetPowerManagementDefaultLimit") == 2
    assert asked.count("nvmlDeviceGetPowerManagementLimit") == 4
    assert a["sources"]["gpu1"]["limit_w"] == 700.0 and b["sources"]["gpu1"]["limit_w"] == 450.0
    assert b["sources"]["gpu1"]["default_w"] == 700.0


def test_run_cases_stores_the_energy_of_every_case(fake_nvml, tmp_path):
    """Through the suite: a case alone (its window includes its process start), batched ones, and a failed case
    that left no record (its stand-in record carries the energy); --json exports read it from `extra`."""
    fake_nvml(_FakeNvml(count=1))
    s = Store(tmp_path / "s.sqlite")
    cases = [Case("selftest", None, {"mode": "sleep", "ms": "600"}),
             Case("selftest", None, {"mode": "sleep", "ms": "100"}),
             Case("selftest", None, {"mode": "fail"})]
    rid = s.create_run("bench", "test", suite.plan_to_json(cases), {}, {})
    assert suite.run_cases(s, rid, cases, dict(OPTIONS, isolate=None), progress=False) == "complete"
    rows = {r["case_id"]: r for r in s.records(rid)}
    long, short, failed = (rows[c.case_id]["extra"]["energy"] for c in cases)
    assert long["sources"]["gpu0"]["joules"] > 0 and long["gpu_watts"] == pytest.approx(WATTS, rel=0.05)
    assert "batch" in long["window"]
    assert short["note"] and short["sources"]["gpu0"]["joules"] is None
    assert rows[cases[2].case_id]["status"] == "failed" and "sources" in failed
    alone = Case("selftest", None, {"mode": "sleep", "ms": "600"})
    rid = s.create_run("bench", "test", suite.plan_to_json([alone]), {}, {})
    suite.run_cases(s, rid, [alone], dict(OPTIONS, isolate=True), progress=False)
    e = s.records(rid)[0]["extra"]["energy"]
    assert "process start" in e["window"] and e["wall_s"] >= 0.6
    line = json.loads(s.export("jsonl", rid).splitlines()[0])
    assert line["extra"]["energy"]["sources"]["gpu0"]["watts"] == pytest.approx(WATTS, rel=0.05)



def test_the_report_shows_energy_per_case_and_gflops_per_watt(fake_nvml, tmp_path):
    from umscope.report import html as report_html
    fake = fake_nvml(_FakeNvml(count=1, counter=[0], limit_mw=650000, default_mw=700000))
    m = energy.Meter(tmp_path / "norapl")
    a, b = _pair(m, lambda: fake.counter.__setitem__(0, 1000000), seconds=4.0)  # 1000 J in 4 s: 250 W
    w = energy.window(a, b, {0}, suite.WINDOW_BATCH)
    gemm = {"type": "record", "benchmark": "app", "op": "app", "processor": "gpu0", "kind": "device", "bytes": 1 << 20,
            "metric": "time_per_iteration", "unit": "ms", "n": 5, "median": 2.0, "min": 2.0, "max": 2.0, "spread": 0.0,
            "app": "gemm", "precision": "fp64", "mode": "explicit", "gflops": 50000.0, "compute_ms": 2000.0,
            "total_ms": 3000.0, "total_excl_init_ms": 3000.0, "iterations": 1000, "checksum": "1", "verified": "freivalds:2"}
    s = Store(tmp_path / "s.sqlite")
    rid = s.create_run("app", "umscope app run gemm", [], {}, {})
    s.add_case_result(rid, Case("app", None, {"name": "gemm"}), "ok", "", 0, 4, energy.attach([dict(gemm)], w))
    s.finish_run(rid, "complete")
    html = pathlib.Path(report_html.write_report(s, rid, str(tmp_path / "r.html"))).read_text()
    part = html[html.index("<h2 id=energy>"):]
    assert "GFLOP/s per watt" in part and "<td class=num>200</td>" in part  # 50000 GFLOP/s over 250 W
    assert "650 (default 700)" in part and "<td class=num>0.5</td>" in part  # limit; 2 s of compute in 4 s
    assert "<td class=num>1000</td>" in part and "<td class=num>250</td>" in part  # GPU J, GPU W
    assert "Not read:" in part and "no /sys/class/powercap" in part
    assert "not run here" in part  # power-cap and governor sweeps are out of bounds
    # A run without energy readings has no energy section.
    rid2 = s.create_run("bench", "x", [], {}, {})
    s.add_case_result(rid2, Case("app", None, {"name": "gemm"}), "ok", "", 0, 4, [dict(gemm)])
    s.finish_run(rid2, "complete")
    assert "id=energy" not in pathlib.Path(report_html.write_report(s, rid2, str(tmp_path / "r2.html"))).read_text()


def test_a_run_where_no_case_has_a_figure_says_so_in_one_line_not_an_empty_table(fake_nvml, tmp_path):
    """No NVML, no RAPL (as on a machine without a GPU): the section says no case has a figure and why, and lists
    no case; a run with one measured case lists that case and counts the others."""
    from umscope.report import html as report_html
    fake_nvml(None)
    m = energy.Meter(tmp_path / "norapl")
    rec = {"type": "record", "benchmark": "cpu-stream", "op": "read", "processor": "cpu", "kind": "system",
           "bytes": 1 << 20, "metric": "bandwidth", "unit": "GB/s", "n": 3, "median": 9.0, "min": 8.0, "max": 10.0,
           "spread": 0.2, "verified": "cpu-reference"}
    s = Store(tmp_path / "s.sqlite")
    rid = s.create_run("bench", "umscope bench cpu-stream", [], {}, {})
    for i, secs in enumerate((2.0, 0.1)):
        a, b = _pair(m, lambda: None, seconds=secs)
        w = energy.window(a, b, set(), suite.WINDOW_BATCH)
        s.add_case_result(rid, Case("cpu-stream", "system", {"bytes": f"{i + 1}MiB"}), "ok", "", 0, secs,
                          energy.attach([dict(rec, bytes=(i + 1) << 20)], w))
    s.finish_run(rid, "complete")
    part = pathlib.Path(report_html.write_report(s, rid, str(tmp_path / "r.html"))).read_text()
    part = part[part.index("<h2 id=energy>"):]
    part = part[:part.index("<h2", 5)] if "<h2" in part[5:] else part
    assert "No case has an energy figure" in part and "none of the 2 case(s)" in part
    assert "<table" not in part and "Not read:" in part


class _FakeNvmlByBus(_FakeNvml):
    """Four GPUs that NVML numbers 0-3 and knows by PCI bus id; GPU 3 alone works (its counter grows)."""
    BUS = ["0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0", "0000:5D:00.0"]

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if bus not in self.BUS:
            raise self.NVMLError("not found")
        return self.BUS.index(bus)


def test_the_case_gpu_is_read_by_its_bus_id_not_nvml_index(fake_nvml, tmp_path):
    # Under CUDA_VISIBLE_DEVICES=3 the case's CUDA device 0 is NVML's GPU 3: on 4 x H100 the first energy run
    # read NVML index 0 (idle, 72 W) while GEMM ran on GPU 3, giving 759 GFLOP/s per W.
    fake = fake_nvml(_FakeNvmlByBus(count=4, counter=[1000000, 1000000, 1000000, 1000000]))
    m = energy.Meter(tmp_path, bus_ids=["0000:5D:00.0"])
    a, b = _pair(m, lambda: fake.counter.__setitem__(3, 1000000 + 1100000))  # NVML's GPU 3: 1100 J
    w = energy.window(a, b, {0}, "test window")
    assert w["gpus"] == [0] and w["gpu_joules"] == pytest.approx(1100.0)
    assert "PCI 0000:5D:00.0" in w["sources"]["gpu0"]["name"] and set(w["sources"]) >= {"gpu0"}
    assert "gpu3" not in w["sources"]
    # Without the bus ids (no probe): NVML's own numbering, named as such.
    w0 = energy.window(*_pair(energy.Meter(tmp_path), lambda: None), {0})
    assert "NVML's index" in w0["sources"]["gpu0"]["name"]


def test_bus_ids_of_indexes_the_probe_gpus_by_cuda_ordinal():
    fp = {"gpus": [{"device": 1, "pci_bus_id": "0000:2A:00.0"}, {"device": 0, "pci_bus_id": "0000:18:00.0"}]}
    assert suite.bus_ids_of(fp) == ["0000:18:00.0", "0000:2A:00.0"]
    assert suite.bus_ids_of({"gpus": []}) == [] and suite.bus_ids_of({}) == []
