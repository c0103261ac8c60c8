"""The energy each case used, read by the parent process around the case from the machine's own counters:

- each GPU's total energy (NVML nvmlDeviceGetTotalEnergyConsumption, mJ, updated every 20-100 ms), with the
  power management limit it ran at (read, never set);
- the CPU packages' energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj, µJ, wrapping at
  max_energy_range_uj);
- hwmon energy counters (energy*_input, µJ) and, where a sensor gives power only (Grace Hopper's ACPI power
  meters, read by the probe), its readings integrated over time by a thread.

A source that cannot be read is recorded as absent with the reason, never as 0. A window shorter than
MIN_WINDOW_S gives no figure but a note: the counters' resolution would make it meaningless. Per-case
results go into every record of the case (`energy`); application records that have a FLOP rate get it per
watt of their GPU (`gflops_per_watt`). docs/energy.md says the method and its limits."""

import threading
import time
from pathlib import Path

from umscope import nvml

# Under this a case's energy is not given: NVML's counter moves in steps every 20-100 ms, so a 0.2 s window
# could be off by half; the same floor for every source keeps the figures of one case comparable.
MIN_WINDOW_S = 0.5
NVML_SOURCE = "NVML nvmlDeviceGetTotalEnergyConsumption (mJ, updated every 20-100 ms)"
RAPL_DIR = "/sys/class/powercap"
HWMON_DIR = "/sys/class/hwmon"
# How often a power-only sensor is read at most (its own averaging interval, where longer, wins).
POWER_PERIOD_S = 0.1
# GFLOP/s per watt divides the compute's rate by the whole case's average power: where the compute is under half
# the case (a 5-iteration GEMM after seconds of initialising its arrays), that average is mostly the idle GPU's
# and the ratio would flatter the GPU, so none is given.
MIN_COMPUTE_SHARE = 0.5


def read_text(path, default=""):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def under_root(root, path) -> Path:
    """/sys/... under `root` (tests give a fake tree)."""
    return Path(root) / path.lstrip("/")


# Grace's ACPI power meters name what they measure in power1_oem_info (e.g. "Module Power Socket 0"):
# module (the whole Grace Hopper module: Grace, Hopper, HBM, LPDDR5X, regulators), Grace (the CPU socket
# with its memory), CPU (the cores' rail) and SysIO (the SoC rail).
_POWER_SENSORS = ("module", "grace", "cpu", "sysio")


def hwmon_power(root="/") -> list:
    """Every hwmon power sensor: its label (power*_oem_info or power*_label), what it measures where the
    label says (one of _POWER_SENSORS), its socket, and the reading now in watts (power*_average, else
    power*_input; microwatts in sysfs) with the averaging interval. The sensor is named by its sysfs path."""
    out = []
    for hw in sorted(under_root(root, "/sys/class/hwmon").glob("hwmon*"), key=lambda p: p.name):
        # a driver puts its attributes in hwmonN or (ACPI's power meter) in hwmonN/device
        for dev in (hw, hw / "device"):
            labels = sorted(dev.glob("power[0-9]*_oem_info")) + sorted(dev.glob("power[0-9]*_label"))
            for info in labels:
                stem = info.name.split("_", 1)[0]
                label = read_text(info)
                reading = read_text(dev / f"{stem}_average") or read_text(dev / f"{stem}_input")
                words = label.lower().split()
                what = words[0] if words and words[0] in _POWER_SENSORS else None
                sock = words[-1] if len(words) >= 2 and words[-2] == "socket" and words[-1].isdigit() else None
                interval = read_text(dev / f"{stem}_average_interval")
                out.append({"sensor": "/" + str((dev / stem).relative_to(root)), "label": label, "what": what,
                            "socket": int(sock) if sock is not None else None,
                            "watts": int(reading) / 1e6 if reading.lstrip("-").isdigit() else None,
                            "interval_ms": int(interval) if interval.isdigit() else None})
            if labels:
                break
    return out


def _read_int(path):
    """(value, None) or (None, reason)."""
    try:
        text = Path(path).read_text().strip()
    except PermissionError:
        return None, f"{path} is readable by root only"
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"
    try:
        return int(text), None
    except ValueError:
        return None, f"{path} holds {text[:40]!r}, not a number"


def rapl_domains(root="/") -> list:
    """The top-level RAPL domains (intel-rapl:N: the packages, and psys where there is one) that have an
    energy counter."""
    base = under_root(root, RAPL_DIR)
    if not base.exists():
        return []
    return [d for d in sorted(base.glob("intel-rapl:*"))
            if d.name.count(":") == 1 and (d / "energy_uj").exists()]


class Meter:
    """Reads every energy source at once (snapshot()); energy(before, after) is what a window used.
    start() begins integrating power-only sensors, stop() ends it; counters need no thread."""

    def __init__(self, root="/", gpus=None, bus_ids=None):
        """gpus: the GPUs to read, as NVML indices (default: every GPU NVML sees). bus_ids: the PCI bus id of
        each CUDA device this process's children see, in CUDA's order (the probe's `gpus`): then GPU i is CUDA
        device i, read through its bus id. NVML numbers GPUs its own way and ignores CUDA_VISIBLE_DEVICES, so
        under CUDA_VISIBLE_DEVICES=3 NVML's index 0 is another GPU than CUDA's device 0."""
        self.root = root
        self.bus_ids = list(bus_ids) if bus_ids else None
        if self.bus_ids is not None:
            self.gpus = list(range(len(self.bus_ids)))
        else:
            self.gpus = list(range(nvml.device_count())) if gpus is None else list(gpus)
        self.why_no_gpu = "" if self.gpus else (nvml.why_unavailable() or "NVML sees no GPU")
        self.rapl = rapl_domains(root)
        self.hwmon_energy = self._hwmon_energy_files()
        self.power = [s for s in hwmon_power(root) if s["watts"] is not None]
        self._integral = {s["sensor"]: 0.0 for s in self.power}
        self._last = {}  # sensor -> (t, watts) of its last reading
        self._samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        intervals = [s["interval_ms"] / 1000 for s in self.power if s.get("interval_ms")]
        self.period = max([POWER_PERIOD_S] + intervals)

    # --- sources ------------------------------------------------------------
    def _hwmon_energy_files(self) -> list:
        out = []
        for hw in sorted(under_root(self.root, HWMON_DIR).glob("hwmon*"), key=lambda p: p.name):
            for dev in (hw, hw / "device"):
                files = sorted(dev.glob("energy[0-9]*_input"))
                for f in files:
                    label = read_text(dev / f.name.replace("_input", "_label")) or f.name
                    out.append((label, f))
                if files:
                    break
        return out

    def _sample_power(self):
        t = time.monotonic()
        now = {s["sensor"]: s["watts"] for s in hwmon_power(self.root) if s["watts"] is not None}
        with self._lock:
            for sensor, w in now.items():
                if sensor in self._last:  # trapezoid between this reading and the one before
                    t0, w0 = self._last[sensor]
                    self._integral[sensor] = self._integral.get(sensor, 0.0) + (t - t0) * (w + w0) / 2
                self._last[sensor] = (t, w)
            self._samples += 1

    def _run(self):
        while not self._stop.wait(self.period):
            self._sample_power()

    def start(self):
        if self.power and self._thread is None:
            self._sample_power()
            self._thread = threading.Thread(target=self._run, name="umscope-power", daemon=True)
            self._thread.start()
        return self

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def snapshot(self) -> dict:
        """Every source's cumulative reading now: {'t': monotonic s, 'sources': {key: {...}}}. It never raises:
        the batch's output reader calls it, and a reader that died would leave the batch to its timeout."""
        t = time.monotonic()
        try:
            return self._snapshot(t)
        except Exception as e:  # noqa: BLE001 - recorded as the reading's failure, with its reason
            return {"t": t, "sources": {"meter": {"name": "umscope's energy meter", "j": None,
                                                  "reason": f"reading failed: {type(e).__name__}: {e}"}}}

    def _snapshot(self, t) -> dict:
        src = {}
        for i in self.gpus:
            by_bus = self.bus_ids is not None and bool(self.bus_ids[i])
            at = self.bus_ids[i] if by_bus else i  # NVML reads by bus id, or by its own index
            j = nvml.energy_j(at)
            which = f"GPU {i} (PCI {at})" if by_bus else f"GPU {i} (NVML's index)"
            src[f"gpu{i}"] = dict({"name": f"{NVML_SOURCE}, {which}", "gpu": i, "j": j,
                                   "reason": None if j is not None else "NVML gives no energy counter for this "
                                   "GPU (before Volta, or not supported)"}, **nvml.power_limits_w(at))
        if not self.gpus:
            src["gpu"] = {"name": NVML_SOURCE, "j": None, "reason": self.why_no_gpu}
        for d in self.rapl:
            name = read_text(d / "name") or d.name
            uj, why = _read_int(d / "energy_uj")
            rng, _ = _read_int(d / "max_energy_range_uj")
            if why and "root only" in why:
                why += " (kernels since 5.10 restrict RAPL: CVE-2020-8694)"
            src[f"rapl:{name}"] = {"name": f"RAPL {RAPL_DIR}/{d.name}/energy_uj ({name}, µJ)",
                                   "j": None if uj is None else uj / 1e6, "reason": why,
                                   "wrap_j": None if not rng else rng / 1e6}
        if not self.rapl:
            src["rapl"] = {"name": f"RAPL {RAPL_DIR}/intel-rapl:*/energy_uj", "j": None,
                           "reason": f"no {RAPL_DIR}/intel-rapl:* with energy_uj (no RAPL driver, not an x86 host, "
                                     "or hidden from this container)"}
        for label, f in self.hwmon_energy:
            uj, why = _read_int(f)
            src[f"hwmon:{label}"] = {"name": f"hwmon /{f.relative_to(self.root)} ({label}, µJ)",
                                     "j": None if uj is None else uj / 1e6, "reason": why}
        if self.power:
            running = self._thread is not None
            if running:
                self._sample_power()  # the window's edge: a reading now, so the integral ends here
            with self._lock:
                for s in self.power:
                    src[f"hwmon-power:{s['label']}"] = {
                        "name": f"hwmon {s['sensor']} ({s['label']}): its power readings integrated every "
                                f"{self.period * 1e3:.0f} ms", "j": self._integral.get(s["sensor"]) if running else None,
                        "reason": None if running else "a power sensor is integrated only while the meter runs"}
        if not self.hwmon_energy and not self.power:
            src["hwmon"] = {"name": f"hwmon {HWMON_DIR}/hwmon*/energy*_input, power*_average|input", "j": None,
                            "reason": f"no energy counter or power sensor under {HWMON_DIR}"}
        return {"t": t, "sources": src}


def _delta(a: dict, b: dict):
    """(joules, None) or (None, reason) between two readings of one source."""
    if a.get("j") is None or b.get("j") is None:
        return None, b.get("reason") or a.get("reason") or "not read"
    d = b["j"] - a["j"]
    if d < 0:
        if a.get("wrap_j"):
            return d + a["wrap_j"], None  # the counter wrapped once at max_energy_range_uj
        return None, "the counter went backwards (driver reloaded or counter reset)"
    return d, None


def window(before: dict, after: dict, used_gpus=None, where="") -> dict:
    """What each source used between two snapshots: {'wall_s', 'window', 'sources': {key: {'name', 'joules',
    'watts'} or {'name', 'joules': None, 'reason'}}, 'gpu_joules', 'gpu_watts', 'gpus'} and a note where the
    window is too short to give a figure. used_gpus: the GPUs the case used (None: every GPU)."""
    wall = max(0.0, after["t"] - before["t"])
    short = wall < MIN_WINDOW_S
    note = (f"the case took {wall:.2f} s, under {MIN_WINDOW_S:g} s: below the energy counters' resolution (NVML's "
            "is updated every 20-100 ms), so no energy is given") if short else None
    out = {"wall_s": round(wall, 4), "window": where, "sources": {}}
    gpus = []
    for key, b in after["sources"].items():
        a = before["sources"].get(key, {"j": None, "reason": "not read at the case's start"})
        j, why = _delta(a, b)
        s = {"name": b["name"]}
        if "gpu" in b:
            s["gpu"] = b["gpu"]
            s["used"] = used_gpus is None or b["gpu"] in used_gpus
            s["power_limit_w"], s["default_power_limit_w"] = a.get("limit_w"), a.get("default_w")
            if s["used"]:
                gpus.append(key)
        if j is not None and short:
            j, why = None, f"under {MIN_WINDOW_S:g} s: below the counter's resolution"
        s["joules"] = None if j is None else round(j, 3)
        if j is None:
            s["reason"] = why
        else:
            s["watts"] = round(j / wall, 2) if wall else None
        out["sources"][key] = s
    used = [out["sources"][k] for k in gpus]
    if used and all(s["joules"] is not None for s in used):
        out["gpu_joules"] = round(sum(s["joules"] for s in used), 3)
        out["gpu_watts"] = round(out["gpu_joules"] / wall, 2)
    out["gpus"] = [out["sources"][k]["gpu"] for k in gpus]
    if note:
        out["note"] = note
    return out


def host_joules(energy: dict):
    """Joules the host's readable sources (RAPL packages, hwmon) used in a window, summed; None where none was
    read."""
    host = [s["joules"] for k, s in (energy.get("sources") or {}).items()
            if not k.startswith("gpu") and s.get("joules") is not None]
    return sum(host) if host else None


def gpus_of(case, options) -> set:
    """The GPUs a case uses, from its parameters; None (every GPU) where they do not say (a launcher's ranks,
    the collectives over all GPUs)."""
    params = case.params or {}
    if case.launch or (case.benchmark in ("nccl", "mpi") and params.get("gpus", "all") == "all"):
        return None
    if case.benchmark in ("nccl", "mpi"):
        return {int(g) for g in str(params["gpus"]).split(",") if g.strip().isdigit()}
    used = {int(params.get("device", options.get("device") or 0))}
    for v in [case.kind or ""] + [str(v) for v in params.values()]:
        for part in v.replace(",", " ").replace("+", " ").split():
            if part.startswith("peer:") and part[5:].isdigit():
                used.add(int(part[5:]))
    if str(params.get("peer", "")).isdigit():
        used.add(int(params["peer"]))
    return used


def per_watt(record: dict, energy: dict):
    """GFLOP/s per watt of an application record with a FLOP rate on a GPU: its own rate (median iteration)
    over its GPU's average power in the case's window, labelled with the power limit the GPU ran at; None for
    a record without a rate or not on a GPU; a value None with the reason where the window gives no fair
    figure (too short, the source absent, compute under MIN_COMPUTE_SHARE of it)."""
    proc = str(record.get("processor") or "")
    if not record.get("gflops") or not proc.startswith("gpu") or not proc[3:].isdigit():
        return None
    src = (energy.get("sources") or {}).get(proc)
    if src is None:
        return {"value": None, "gpu": proc, "reason": f"no energy reading of {proc}"}
    out = {"gpu": proc, "gflops": record["gflops"], "watts": src.get("watts"),
           "power_limit_w": src.get("power_limit_w"), "default_power_limit_w": src.get("default_power_limit_w")}
    if record.get("compute_ms") is not None and energy.get("wall_s"):
        # The rate is the compute's; the power is the whole case's average (setup and checks too): this share
        # says how much of the window the compute was.
        out["compute_share"] = round(min(1.0, record["compute_ms"] / 1e3 / energy["wall_s"]), 3)
    if not src.get("watts"):
        return dict(out, value=None, reason=energy.get("note") or src.get("reason") or "no power figure")
    if out.get("compute_share", 1.0) < MIN_COMPUTE_SHARE:
        return dict(out, value=None, reason=f"the compute was {out['compute_share']:.0%} of the case, under "
                    f"{MIN_COMPUTE_SHARE:.0%}: the case's average power is mostly its setup's (run more --iterations)")
    return dict(out, value=round(record["gflops"] / src["watts"], 4))


def attach(records: list, energy: dict) -> list:
    """Puts the case's energy into each of its records, and GFLOP/s per watt into those with a FLOP rate."""
    if energy is None:
        return records
    for r in records:
        r["energy"] = energy
        pw = per_watt(r, energy)
        if pw is not None:
            r["gflops_per_watt"] = pw
    return records
