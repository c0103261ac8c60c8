"""Hardware counters for traffic (`umscope profile --counters`): bytes over the host link (PCIe; NVLink
to other GPUs) and to/from the GPU's own memory, per kernel and over time, for an unmodified program.

Sources, each named in every record and figure:
- "CUPTI range profiler": libumcounters (native/profiler/counters_range.cpp) in auto-range, kernel-replay mode,
  one range per kernel launch, with Nsight Compute's metrics (pcie__read_bytes.sum, pcie__write_bytes.sum,
  nvlrx/nvltx__bytes.sum; or dram__bytes_read/write.sum and lts__t_sectors_aperture_sysmem_op_read/write.sum).
  CUPTI serialises kernels while it profiles them: kernel times are not those of an unprofiled run.
- "CUPTI PM sampling" (native/profiler/counters_sampling.cpp): the device's PCIe, NVLink and DRAM byte
  counters sampled over the whole run. Copies and migrations are not kernels: only this source (or NVML)
  sees them.
- "NVML PCIe counters": the driver's PCIe TX/RX byte counters (nvidia-ml-py field values), read around the
  run and every period, where the profiling API is refused (the driver restricts it to administrators).
"""

import json
import os
import threading
import time
from pathlib import Path

RANGE = "CUPTI range profiler"
PM = "CUPTI PM sampling"
NVML = "NVML PCIe counters"

# A metric's bytes: sector counters are 32-byte L2 sectors.
SECTOR = 32
# Link counters count TLP bytes, headers included: pcie_read is what the GPU received (read completions:
# host -> device data), pcie_write what it sent (read requests and device -> host writes). On the H100 a
# 1 GiB zero-copy read by SMs counted 1.09 GiB read and 0.125 GiB written (128-byte reads: a 12-byte
# completion header per 128 bytes, a 16-byte request each): docs/counters.md.
LINK_METRICS = {"pcie__read_bytes.sum": "pcie_read", "pcie__write_bytes.sum": "pcie_write",
                "nvlrx__bytes.sum": "nvlink_rx", "nvltx__bytes.sum": "nvlink_tx",
                "ctc__rx_bytes.sum": "c2c_rx", "ctc__tx_bytes.sum": "c2c_tx"}
# Payload bytes: GPU memory, and L2 sectors from the SMs' L1s to system memory (zero-copy). The plain
# aperture counters add the copies between the two L2 partitions (1.5x on the H100): named apart.
MEMORY_METRICS = {"dram__bytes_read.sum": "dram_read", "dram__bytes_write.sum": "dram_write",
                  "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum": "sysmem_read",
                  "lts__t_sectors_srcunit_tex_aperture_sysmem_op_write.sum": "sysmem_write",
                  "lts__t_sectors_aperture_sysmem_op_read.sum": "l2_sysmem_read_with_fabric",
                  "lts__t_sectors_aperture_sysmem_op_write.sum": "l2_sysmem_write_with_fabric",
                  "lts__t_sectors_srcunit_tex.sum": "l1_l2"}
NAMES = {**LINK_METRICS, **MEMORY_METRICS}
MODES = ("kernel", "sample")
SETS = ("link", "memory")


def library_path():
    """libumcounters, if this build has one: $UMSCOPE_UMCOUNTERS, else beside $UMSCOPE_UMTRACE (a build
    folder or a copied set of binaries), else the installed package's."""
    env = os.environ.get("UMSCOPE_UMCOUNTERS")
    if env:
        return env if Path(env).exists() else None
    places = [Path(__file__).resolve().parent.parent / "lib"]
    if os.environ.get("UMSCOPE_UMTRACE"):
        places.insert(0, Path(os.environ["UMSCOPE_UMTRACE"]).parent)
    lib = next((p / "libumcounters.so" for p in places if (p / "libumcounters.so").exists()), None)
    return str(lib) if lib else None


def parse_modes(text):
    """'sample' (also the default: no value, or 'all') or 'kernel' -> a one-mode tuple; ValueError otherwise.
    CUPTI runs one of the two at a time: with PM sampling on, the range profiler's counter availability
    query answered CUPTI_ERROR_HARDWARE_BUSY on the H100."""
    if text in (None, "", "all"):
        return ("sample",)
    modes = tuple(dict.fromkeys(m.strip() for m in str(text).split(",") if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"--counters takes kernel or sample, got {text!r}")
    if len(modes) > 1:
        raise ValueError("--counters takes kernel or sample, not both: CUPTI's range profiler and PM sampling "
                         "share the counter hardware (CUPTI_ERROR_HARDWARE_BUSY)")
    return modes


def environment(path, modes, counter_set="link", period_us=1000):
    """The variables that make libumcounters (or libumtrace with counters) write to `path`."""
    if counter_set not in SETS:
        raise ValueError(f"counter set must be one of {', '.join(SETS)}, got {counter_set!r}")
    return {"UMSCOPE_COUNTERS_FILE": str(path), "UMSCOPE_COUNTERS": ",".join(modes),
            "UMSCOPE_COUNTER_SET": counter_set, "UMSCOPE_COUNTER_PERIOD_US": str(int(period_us))}


def inject(env, path, modes, counter_set="link", period_us=1000, tracer_injected=False) -> bool:
    """Sets env (a dict: the program's environment) so that the program's counters are written to `path`: by
    libumtrace where the tracer is injected (it reads UMSCOPE_COUNTERS_FILE and runs the counters itself: CUPTI
    allows one subscriber per process), else by libumcounters injected. False where neither can count (this
    build has no libumcounters)."""
    env.update(environment(path, modes, counter_set, period_us))
    if tracer_injected:
        return True
    lib = library_path()
    if lib is None:
        return False
    env["CUDA_INJECTION64_PATH"] = lib
    return True


def value_bytes(metric, v):
    return v * SECTOR if "sectors" in metric else v


def read(path) -> dict:
    """libumcounters' JSON lines -> {start, configs, ranges, samples, errors, dropped, complete, refused}."""
    out = {"start": None, "configs": [], "ranges": [], "samples": [], "errors": [], "dropped": 0,
           "complete": False, "refused": False}
    try:
        f = open(path, encoding="utf-8")
    except OSError:
        return out
    with f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash
            k = e.get("k")
            if k == "start":
                out["start"] = e
            elif k == "config":
                out["configs"].append(e)
            elif k == "range":
                out["ranges"].append(e)
            elif k == "sample":
                out["samples"].append(e)
            elif k == "error":
                out["errors"].append(e)
                if "INSUFFICIENT_PRIVILEGES" in str(e.get("cupti", "")).upper() or e.get("code") == 35:
                    out["refused"] = True
            elif k == "dropped":
                out["dropped"] += int(e.get("n", 1))
            elif k == "end":
                out["complete"] = True
    return out


def kernel_table(parsed) -> list:
    """Per kernel name and device: launches and summed bytes per metric (sector counts turned into bytes)."""
    rows = {}
    for r in parsed["ranges"]:
        key = (r.get("dev", 0), r.get("n", "?"))
        row = rows.setdefault(key, {"device": key[0], "kernel": key[1], "launches": 0, "bytes": {}})
        row["launches"] += 1
        for m, v in (r.get("m") or {}).items():
            name = NAMES.get(m, m)
            row["bytes"][name] = row["bytes"].get(name, 0.0) + value_bytes(m, v)
    return sorted(rows.values(), key=lambda r: -sum(r["bytes"].values()))


def per_launch(parsed, device=None) -> list:
    """Every kernel launch in order: (name, {metric name: bytes})."""
    return [(r.get("n", "?"), {NAMES.get(m, m): value_bytes(m, v) for m, v in (r.get("m") or {}).items()})
            for r in parsed["ranges"] if device is None or r.get("dev", 0) == device]


def sample_wall(parsed, ts):
    """A CUPTI timestamp (ns) as wall-clock seconds (CLOCK_REALTIME), through the start record's pair."""
    st = parsed["start"] or {}
    if st.get("t") is None or st.get("w") is None:
        return None
    return (st["w"] + (ts - st["t"])) / 1e9


def totals(parsed, device=None, interval=None) -> dict:
    """Bytes per metric name summed over the PM samples (of one device), or over those whose middle lies
    in interval = (start, end) wall-clock seconds."""
    tot = {}
    for s in parsed["samples"]:
        if device is not None and s.get("dev", 0) != device:
            continue
        if interval is not None:
            mid = sample_wall(parsed, (s["s"] + s["e"]) / 2)
            if mid is None or not interval[0] <= mid <= interval[1]:
                continue
        for m, v in (s.get("m") or {}).items():
            name = NAMES.get(m, m)
            tot[name] = tot.get(name, 0.0) + value_bytes(m, v)
    return tot


def series(parsed, device=0, t0=None, max_points=600) -> dict:
    """Throughput over time per metric name: {name: [(seconds since t0, bytes/s)]}; t0 is a wall-clock time
    (the program's start), else the first sample. Samples are merged in groups to at most max_points."""
    smp = [s for s in parsed["samples"] if s.get("dev", 0) == device and s["e"] > s["s"]]
    if not smp:
        return {}
    base = t0 if t0 is not None else sample_wall(parsed, smp[0]["s"])
    step = max(1, -(-len(smp) // max_points))
    out = {}
    for i in range(0, len(smp), step):
        group = smp[i:i + step]
        dt = (group[-1]["e"] - group[0]["s"]) / 1e9
        mid = sample_wall(parsed, (group[0]["s"] + group[-1]["e"]) / 2)
        if dt <= 0 or mid is None:
            continue
        for m in group[0].get("m") or {}:
            b = sum(value_bytes(m, g["m"].get(m, 0.0)) for g in group)
            out.setdefault(NAMES.get(m, m), []).append((round(mid - base, 6), b / dt))
    return out


WRAP = 1 << 32


class NvmlLink(threading.Thread):
    """NVML's PCIe TX/RX byte counters of each GPU, read every period (the fallback source). TX is what the
    GPU sent (device -> host), RX what it received (host -> device)."""

    def __init__(self, gpus, period=0.1):
        super().__init__(daemon=True)
        self.gpus, self.period = list(gpus), period
        self.stop = threading.Event()
        self.points = {i: [] for i in range(len(self.gpus))}  # i -> [(wall s, tx, rx)]
        self.why = None

    def read_once(self):
        from umscope import nvml
        t = time.time()
        for i, bus in enumerate(self.gpus):
            v = nvml.pcie_bytes(bus)
            if v is None:
                self.why = nvml.why_unavailable() or "NVML has no PCIe byte counters on this GPU"
                continue
            self.points[i].append((t, v["tx"], v["rx"]))

    def run(self):
        while True:
            self.read_once()
            if self.stop.wait(self.period):
                self.read_once()
                return

    def totals(self, i=0) -> dict:
        """Bytes sent and received between the first and last reading. NVML's counters are 32-bit on the
        H100 (they wrapped within a 2 GiB run): each step is taken modulo 2**32, so a period must move
        less than 4 GiB (the default 100 ms does at PCIe 5 speeds)."""
        p = self.points.get(i) or []
        if len(p) < 2:
            return {}
        tx = sum((b[1] - a[1]) % WRAP for a, b in zip(p, p[1:]))
        rx = sum((b[2] - a[2]) % WRAP for a, b in zip(p, p[1:]))
        return {"pcie_tx": tx, "pcie_rx": rx}


def records(parsed, nvml_link=None, t0=None, label_set="link") -> list:
    """Records for the store and the report: link and memory byte totals per device and source, the
    per-kernel table, and the throughput series; every one names its source."""
    recs = []
    devs = sorted({s.get("dev", 0) for s in parsed["samples"]} | {r.get("dev", 0) for r in parsed["ranges"]})
    for dev in devs:
        tot = totals(parsed, dev)
        if tot:
            recs.append(_rec("counter_totals", dev, sum(v for k, v in tot.items() if k in LINK_METRICS.values()),
                             PM, by_metric=tot, samples=sum(1 for s in parsed["samples"] if s.get("dev", 0) == dev),
                             period_ns=next((c.get("period_ns") for c in parsed["configs"]
                                             if c.get("profiler") == "pm_sampling" and c.get("dev") == dev), None)))
            ser = series(parsed, dev, t0)
            if ser:
                recs.append(_rec("counter_series", dev, 0, PM, clock="program" if t0 is not None else "samples",
                                 series={k: {"t": [p[0] for p in v], "bytes_per_s": [p[1] for p in v]}
                                         for k, v in ser.items()}))
        table = [r for r in kernel_table(parsed) if r["device"] == dev]
        if table:
            launches = per_launch(parsed, dev)
            summed = {}
            for _, b in launches:
                for k, v in b.items():
                    summed[k] = summed.get(k, 0.0) + v
            recs.append(_rec("kernel_traffic", dev, sum(summed.values()), RANGE, kernels=table[:200],
                             launches=len(launches), by_metric=summed, launch_bytes=[
                                 {"kernel": n, **b} for n, b in launches[:5000]],
                             passes=next((c.get("passes") for c in parsed["configs"]
                                          if c.get("profiler") == "range" and c.get("dev") == dev), None)))
    if nvml_link is not None:
        for i in nvml_link.points:
            tot = nvml_link.totals(i)
            if tot:
                recs.append(_rec("counter_totals", i, tot["pcie_tx"] + tot["pcie_rx"], NVML, by_metric=tot,
                                 samples=len(nvml_link.points[i]), period_ns=int(nvml_link.period * 1e9)))
    return recs


def _rec(op, dev, value, source, **extra):
    return {"type": "record", "benchmark": "profile", "op": op, "processor": f"gpu{dev}", "metric": "bytes_moved",
            "unit": "B", "n": 1, "median": value, "min": value, "max": value, "value": value, "source": source,
            **extra}


def notes(parsed, requested) -> list:
    """One line per problem the counters met, for the profile's notes."""
    out = []
    if parsed["start"] is None:
        return [f"--counters: the program wrote no counter data (it may not use CUDA): {', '.join(requested)}"]
    for e in parsed["errors"]:
        out.append(f"--counters: CUPTI refused to {e.get('what')}: {e.get('cupti')}")
    if parsed["refused"]:
        out.append("--counters: the driver restricts GPU performance counters to administrators "
                   "(NVreg_RestrictProfilingToAdminUsers); NVML's PCIe byte counters are used instead")
    if parsed["dropped"]:
        out.append(f"--counters: {parsed['dropped']} ranges or sample buffers were dropped")
    if not parsed["complete"]:
        out.append("--counters: the counter data ended early (the program died)")
    return out


class Session:
    """Counters around one profiled program: prepare() sets its environment before it starts (libumcounters
    injected, or the counters riding in libumtrace when the tracer is injected: CUPTI allows one
    subscriber per process), start()/finish() run NVML's PCIe counters beside it, finish() reads
    everything back as records and notes."""

    def __init__(self, modes, counter_set="link", gpus=(), period_s=0.1, period_us=1000):
        import tempfile
        self.modes, self.counter_set, self.period_us = tuple(modes), counter_set, period_us
        fd, self.path = tempfile.mkstemp(prefix="umcounters-", suffix=".jsonl")
        os.close(fd)
        self.nvml = NvmlLink(gpus, period_s) if gpus else None
        self.notes = []

    def prepare(self, env, tracer_injected=False):
        """Adds the counters' variables to env (a dict) and says what it did in self.notes."""
        if not inject(env, self.path, self.modes, self.counter_set, self.period_us, tracer_injected):
            self.notes.append("--counters: this umscope was built without libumcounters (CUPTI); only NVML's "
                              "PCIe counters are read")

    def start(self):
        if self.nvml is not None:
            self.nvml.start()

    def stop(self):
        """Once the program has ended: NVML's last reading starts (about 90 ms on the H100 machine) and runs
        while the caller reads the trace; finish() waits for it."""
        if self.nvml is not None:
            self.nvml.stop.set()

    def finish(self, t0_wall=None):
        """(records, notes) once the program has ended."""
        if self.nvml is not None:
            self.nvml.stop.set()
            self.nvml.join()
        parsed = read(self.path)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        notes_ = list(self.notes) + notes(parsed, self.modes)
        if self.nvml is not None and not any(self.nvml.points.values()) and self.nvml.why:
            notes_.append(f"--counters: NVML's PCIe byte counters: {self.nvml.why}")
        return records(parsed, self.nvml, t0_wall), notes_
