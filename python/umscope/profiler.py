"""`umscope profile -- CMD`: runs an unmodified program and samples, for its
whole process tree, resident set size (per NUMA node where there are
several), the GPU memory its processes use (NVML per process; where NVML
sees no processes, as in many containers, the device's used memory minus a
baseline taken before the start, labelled so), GPU utilisation and, with
--power, GPU power and energy (NVML) and host energy (RAPL through powercap,
where readable). Output and exit status of the program pass through. The
sampler measures its own CPU time, so its overhead is reported, not assumed.
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from umscope import nvml
from umscope.errors import UsageError

PAGE = os.sysconf("SC_PAGE_SIZE")


def parse_period(text: str) -> float:
    """'100ms', '0.5s', '2' (seconds) -> seconds; must be positive."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", str(text))
    if not m:
        raise UsageError(f"--period takes a duration such as 100ms or 0.5s, got {text!r}")
    v = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if v <= 0:
        raise UsageError("--period must be longer than 0")
    if v < 0.001:
        raise UsageError("--period below 1 ms would measure the sampler, not the program")
    return v


def _children(pid: int) -> list:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [int(x) for x in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def _children_by_scan(root: int) -> set:
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p and c not in tree:
                tree.add(c)
                frontier.append(c)
    return tree


HAVE_CHILDREN_FILE = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def process_tree(root: int) -> set:
    """The root and all its descendants (through /proc/PID/task/TID/children where the kernel has it:
    cost grows with the tree, not with the machine)."""
    if not HAVE_CHILDREN_FILE:
        return _children_by_scan(root)
    tree, frontier = set(), [root]
    while frontier:
        p = frontier.pop()
        if p in tree:
            continue
        tree.add(p)
        frontier += _children(p)
    return tree


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def numa_bytes(pid: int) -> dict:
    """Resident bytes per NUMA node from numa_maps (N<node>=<pages>, in each mapping's page size)."""
    out = {}
    try:
        text = Path(f"/proc/{pid}/numa_maps").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        kpage = re.search(r"kernelpagesize_kB=(\d+)", line)
        size = int(kpage.group(1)) * 1024 if kpage else PAGE
        for node, pages in re.findall(r"\bN(\d+)=(\d+)", line):
            out[int(node)] = out.get(int(node), 0) + int(pages) * size
    return out


def _rapl_files() -> list:
    base = Path("/sys/class/powercap")
    files = []
    if base.exists():
        for d in sorted(base.glob("intel-rapl:*")):
            if d.name.count(":") == 1 and (d / "energy_uj").exists():
                files.append(d / "energy_uj")
    return files


def host_energy_j(files):
    try:
        return sum(int(f.read_text()) for f in files) / 1e6
    except (OSError, ValueError):
        return None


class Sampler(threading.Thread):
    def __init__(self, root_pid, period, gpus, power=False, numa_nodes=1, baseline=None):
        super().__init__(daemon=True)
        self.root, self.period, self.gpus, self.power = root_pid, period, gpus, power
        self.numa = numa_nodes > 1
        self.baseline = baseline or {}
        self.rapl = _rapl_files() if power else []
        self.stop = threading.Event()
        self.ready, self.go = threading.Event(), threading.Event()  # warmed up; the program has started
        self.pids = set()
        self.series = {}  # name -> list of (t, value)
        self.cpu_s = 0.0
        self.samples = 0
        self.t0 = time.monotonic()
        self.energy0 = self._energy() if power else {}

    def _energy(self) -> dict:
        e = {f"gpu{i}": nvml.energy_j(bus) for i, bus in enumerate(self.gpus)}
        if self.rapl:
            e["host"] = host_energy_j(self.rapl)
        return {k: v for k, v in e.items() if v is not None}

    def _put(self, name, t, v):
        if v is not None:
            self.series.setdefault(name, []).append((t, v))

    def sample(self):
        c0 = time.thread_time()
        t = time.monotonic() - self.t0
        # The tree is walked every fifth sample: it reads one children file per thread of every process
        # (a 16-thread program: ~1 ms a walk where system calls are slow), and trees change rarely.
        if self.samples % 5 == 1 or not self.pids:
            self.pids = process_tree(self.root)
        pids = self.pids
        self._put("rss", t, sum(rss_bytes(p) for p in pids))
        if self.numa:
            per = {}
            for p in pids:
                for node, b in numa_bytes(p).items():
                    per[node] = per.get(node, 0) + b
            for node, b in per.items():
                self._put(f"rss_node{node}", t, b)
        for i, bus in enumerate(self.gpus):
            # Both views, each labelled: NVML's per-process figure (which may leave out managed
            # memory, and which containers may hide) and the device's used memory above the baseline.
            # NVML's process list is the costly query, and its cost varies while the GPU is busy
            # (up to tens of ms seen): every tenth sample, once a second at the default period.
            if self.samples % 10 == 0:
                procs = nvml.processes(bus)
                mine = {p: b for p, b in (procs or {}).items() if p in pids}
                if mine:
                    self._put(f"gpu{i}_mem", t, sum(mine.values()))
            m = nvml.memory(bus)
            if m is not None:
                self._put(f"gpu{i}_mem_device", t, max(0, m["used"] - self.baseline.get(i, 0)))
            # Utilisation is NVML's share of busy time over its own window (1/6 s to 1 s by product):
            # every other sample (200 ms at the default period) follows it. Each NVML call is an ioctl,
            # which dominates the sampler's cost where system calls are slow (a gVisor sandbox).
            if self.samples % 2 == 1:
                u = nvml.utilization(bus)
                if u:
                    self._put(f"gpu{i}_util", t, u["gpu"])
            # NVML reports power averaged over the last second on Ampere and newer GPUs, so a reading
            # every 500 ms loses nothing; energy comes from the GPU's own counter, exact. Offset from
            # the process-list samples so no one sample pays for both.
            if self.power and self.samples % 5 == 2:
                self._put(f"gpu{i}_power", t, nvml.power_w(bus))
        if self.rapl and self.samples % 5 == 4:  # a cumulative counter: every 500 ms is enough
            self._put("host_energy", t, host_energy_j(self.rapl))
        self.samples += 1
        self.cpu_s += time.thread_time() - c0

    def warm_up(self):
        """Every query once, untimed, before the program starts."""
        process_tree(os.getpid())
        rss_bytes(os.getpid())
        for bus in self.gpus:
            nvml.memory(bus)
            nvml.utilization(bus)
            nvml.processes(bus)
            if self.power:
                nvml.power_w(bus)
        if self.rapl:
            host_energy_j(self.rapl)

    def run(self):
        self.warm_up()
        self.ready.set()
        self.go.wait()
        if self.stop.is_set():
            return
        self.t0 = time.monotonic()
        next_t = time.monotonic()
        while not self.stop.is_set():
            self.sample()
            next_t += self.period
            self.stop.wait(max(0.0, next_t - time.monotonic()))


def tracer_path():
    """The CUPTI injection library, if this build has one."""
    env = os.environ.get("UMSCOPE_UMTRACE")
    if env:
        return env if Path(env).exists() else None
    lib = Path(__file__).parent / "lib" / "libumtrace.so"
    return str(lib) if lib.exists() else None


def cupti_path(lib):
    """The libcupti that libumtrace links (for NVTX_INJECTION64_PATH), found by loading it here."""
    import ctypes
    try:
        ctypes.CDLL(lib, mode=os.RTLD_LOCAL)
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libcupti" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


def _ranges(markers, t0):
    """NVTX ranges [(name, start s, end s)] and instant marks [(name, s)] from CUPTI marker records."""
    opened, ranges, instants = {}, [], []
    for m in sorted(markers, key=lambda m: m["t"]):
        t = round((m["t"] - t0) / 1e9, 6)
        if m["fl"] & 1:
            instants.append((m.get("n") or "mark", t))
        elif m["fl"] & 2:
            opened[m["id"]] = (m.get("n") or f"range {m['id']}", t)
        elif m["fl"] & 4 and m["id"] in opened:
            name, start = opened.pop(m["id"])
            ranges.append((name, start, t))
    ranges += [(name, start, None) for name, start in opened.values()]  # never closed
    return sorted(ranges, key=lambda r: r[1]), instants


CAUSES = {0: "unknown", 1: "user", 2: "coherence", 3: "prefetch", 4: "eviction", 5: "access counters"}
ACCESS = {0: "unknown", 1: "read", 2: "write", 3: "atomic", 4: "prefetch"}
COUNTERS = {1: "htod", 2: "dtoh", 3: "cpu_fault", 4: "gpu_fault", 5: "thrashing", 6: "throttling", 7: "remote_map",
            8: "dtod"}



def read_trace_lines(path) -> list:
    """libumtrace's JSON lines as dicts; a line cut by a crash is left out."""
    import json as _json
    ev = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                ev.append(_json.loads(line))
            except ValueError:
                pass  # a line cut by a crash
    return ev


def parse_trace(path) -> dict:
    """Totals, timelines and analyses from libumtrace's JSON lines."""
    try:
        ev = read_trace_lines(path)
    except OSError:
        return {}
    if not ev:
        return {}  # the library never started: the program did not initialise CUDA
    start = next((e for e in ev if e.get("k") == "start"), {})
    t0 = start.get("t")
    um = [e for e in ev if e.get("k") == "um"]
    if t0 is None:
        t0 = min((e["s"] for e in um), default=0)
    out = {"errors": [e for e in ev if e.get("k") == "error"], "complete": any(e.get("k") == "end" for e in ev),
           "dropped": sum(e.get("n", 0) for e in ev if e.get("k") == "dropped")}
    totals = {name: 0 for name in COUNTERS.values()}
    events = {name: 0 for name in COUNTERS.values()}
    by_cause = {"htod": {}, "dtoh": {}}
    faults_by_access = {}
    timeline = {"htod": [], "dtoh": []}
    cum = {"htod": 0, "dtoh": 0}
    allocs = sorted(((e["a"], e["b"]) for e in ev if e.get("k") == "mem" and e.get("op") == 1), key=lambda x: x[0])
    per_alloc = {}
    for e in sorted(um, key=lambda e: e["s"]):
        name = COUNTERS.get(e["c"], f"counter{e['c']}")
        # A CPU page-fault record is one fault (its value field is not a count on this CUPTI).
        totals[name] = totals.get(name, 0) + (1 if name == "cpu_fault" else e["v"])
        events[name] = events.get(name, 0) + 1
        if name in by_cause:
            cause = CAUSES.get(e.get("f", 0), str(e.get("f")))
            by_cause[name][cause] = by_cause[name].get(cause, 0) + e["v"]
            cum[name] += e["v"]
            timeline[name].append((round((e["e"] - t0) / 1e9, 6), cum[name]))
            for a, b in allocs:
                if a <= e["a"] < a + b:
                    slot = per_alloc.setdefault(a, {"address": a, "bytes": b, "htod": 0, "dtoh": 0, "t": [],
                                                     "in": [], "out": []})
                    slot[name] += e["v"]
                    slot["t"].append(round((e["e"] - t0) / 1e9, 6))
                    slot["in"].append(slot["htod"])
                    slot["out"].append(slot["dtoh"])
                    break
        if name == "gpu_fault":
            acc = ACCESS.get(e.get("f", 0), str(e.get("f")))
            faults_by_access[acc] = faults_by_access.get(acc, 0) + e["v"]
    ranges, instants = _ranges([e for e in ev if e.get("k") == "marker"], t0)
    for a in per_alloc.values():  # at most 400 points per allocation, the last one kept
        step = max(1, len(a["t"]) // 400)
        for k in ("t", "in", "out"):
            a[k] = a[k][::step] + ([a[k][-1]] if (len(a[k]) - 1) % step else [])
    out.update(totals=totals, events=events, by_cause=by_cause, faults_by_access=faults_by_access,
               timeline=timeline, allocations=list(per_alloc.values()), ranges=ranges, instants=instants,
               wall_start=start.get("w"),
               kernels=sum(1 for e in ev if e.get("k") == "kernel"),
               kernel_s=sum(e["e"] - e["s"] for e in ev if e.get("k") == "kernel") / 1e9,
               memcpy_bytes=sum(e["b"] for e in ev if e.get("k") == "memcpy"),
               allocations_made=len(allocs))
    # The studies' analyses: faults per migration, eviction against migration.
    migrations = events["htod"]
    out["faults_per_migration"] = totals["gpu_fault"] / migrations if migrations else None
    out["eviction_to_migration"] = (by_cause["dtoh"].get("eviction", 0) / totals["htod"]) if totals["htod"] else None
    return out


def shift_trace(tr, offset):
    """Puts the trace's times (seconds since the tracer started) on the sampler's clock (seconds since the
    program started), so one time axis serves both."""
    sh = lambda t: None if t is None else round(t + offset, 6)  # noqa: E731
    for d in tr["timeline"]:
        tr["timeline"][d] = [(sh(t), v) for t, v in tr["timeline"][d]]
    for a in tr["allocations"]:
        a["t"] = [sh(t) for t in a["t"]]
    tr["ranges"] = [(n, sh(a), sh(b)) for n, a, b in tr["ranges"]]
    tr["instants"] = [(n, sh(t)) for n, t in tr["instants"]]
    tr["clock"] = "program"


def trace_records(tr: dict) -> list:
    recs = []
    if not tr:
        return recs
    for d in ("htod", "dtoh"):
        pts = tr["timeline"][d]
        if pts:
            recs.append({"type": "record", "benchmark": "profile", "op": f"um_{d}_cumulative", "processor": "gpu0",
                         "metric": "bytes_moved", "unit": "B", **_summary([v for _, v in pts]),
                         "t": [t for t, _ in pts], "samples": [v for _, v in pts]})
    t = tr["totals"]
    allocs = [{k: a[k] for k in ("address", "bytes", "htod", "dtoh")} for a in tr["allocations"]]
    timelines = [{k: a[k] for k in ("address", "bytes", "t", "in", "out")}
                 for a in sorted(tr["allocations"], key=lambda a: -(a["htod"] + a["dtoh"]))[:6]]
    recs.append({"type": "record", "benchmark": "profile", "op": "um_trace", "processor": "gpu0", "metric": "um_events",
                 "unit": "", "n": 1, "median": t["htod"] + t["dtoh"], "min": 0, "max": t["htod"] + t["dtoh"],
                 "value": t["htod"] + t["dtoh"], "totals": t, "events": tr["events"], "by_cause": tr["by_cause"],
                 "faults_by_access": tr["faults_by_access"], "allocations": allocs, "allocation_timelines": timelines,
                 "ranges": tr.get("ranges", []), "instants": tr.get("instants", []),
                 "clock": tr.get("clock", "trace"),
                 "kernels": tr["kernels"], "kernel_s": tr["kernel_s"], "memcpy_bytes": tr["memcpy_bytes"],
                 "allocations_made": tr["allocations_made"], "faults_per_migration": tr["faults_per_migration"],
                 "eviction_to_migration": tr["eviction_to_migration"], "trace_complete": tr["complete"],
                 "dropped": tr["dropped"], "cupti_errors": [e.get("what", "") + ": " + e.get("cupti", "")
                                                            for e in tr["errors"]]})
    return recs


def profile(cmd, period=0.1, power=False, gpus=(), numa_nodes=1, um_trace=False):
    """Runs cmd; returns (exit status as a shell reports it, records, notes)."""
    if not cmd:
        raise UsageError("profile needs a command after --, e.g. umscope profile -- ./app args")
    notes = []
    env = dict(os.environ)
    trace_file = None
    if um_trace:
        lib = tracer_path()
        if lib is None:
            notes.append("--um-trace: this umscope was built without CUPTI (no libumtrace); profiling goes on "
                         "without unified-memory events")
        else:
            import tempfile
            fd, trace_file = tempfile.mkstemp(prefix="umtrace-", suffix=".jsonl")
            os.close(fd)
            env["CUDA_INJECTION64_PATH"] = lib
            env["UMSCOPE_TRACE_FILE"] = trace_file
            # NVTX ranges the program emits reach CUPTI through its NVTX injection.
            cupti = cupti_path(lib)
            if cupti and "NVTX_INJECTION64_PATH" not in env:
                env["NVTX_INJECTION64_PATH"] = cupti
    baseline = {}
    for i, bus in enumerate(gpus):
        m = nvml.memory(bus)
        if m:
            baseline[i] = m["used"]
    # The sampler thread starts first and makes every query once (its first calls cost far more than
    # the later ones: tens of ms in the H100 machine's sandbox), then waits for the program.
    sampler = Sampler(None, period, list(gpus), power, numa_nodes, baseline)
    sampler.start()
    sampler.ready.wait(30)
    start = time.time()
    try:
        proc = subprocess.Popen(cmd, env=env)
    except (FileNotFoundError, PermissionError) as err:
        sampler.stop.set()
        sampler.go.set()
        sampler.join()
        what = "command not found" if isinstance(err, FileNotFoundError) else "permission denied"
        raise UsageError(f"{what}: {cmd[0]}") from None
    sampler.root = proc.pid
    sampler.go.set()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the program; we keep the samples
    maxrss = None
    try:
        # wait4 gives the kernel's high-water mark of the program's RSS (ru_maxrss: the largest process of
        # its tree that was waited for), exact where the sampler may miss a short peak.
        _, st, usage = os.wait4(proc.pid, 0)
        rc = proc.returncode = os.waitstatus_to_exitcode(st)
        maxrss = usage.ru_maxrss * 1024
    except ChildProcessError:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old)
        sampler.stop.set()
        sampler.join()
    wall = time.time() - start
    status = rc if rc >= 0 else 128 - rc
    energy = {}
    if power:
        e1 = sampler._energy()
        energy = {k: e1[k] - sampler.energy0[k] for k in e1 if k in sampler.energy0}
    if trace_file:
        tr = parse_trace(trace_file)
        if tr and tr.get("wall_start"):
            shift_trace(tr, tr["wall_start"] / 1e9 - start)
        if not tr:
            notes.append("--um-trace: the program wrote no trace (it may not use CUDA, or CUPTI could not attach)")
        for err in (tr or {}).get("errors", []):
            notes.append(f"--um-trace: CUPTI refused to {err.get('what')}: {err.get('cupti')}")
        if tr and not tr.get("complete"):
            notes.append("--um-trace: the trace ended early (the program died); what was flushed is kept")
        extra = trace_records(tr)
        os.unlink(trace_file)
    else:
        extra = []
    records = _records(cmd, sampler, wall, rc, status, energy, notes) + extra
    if maxrss:
        records.insert(0, {"type": "record", "benchmark": "profile", "op": "rss_peak", "processor": "host",
                           "metric": "memory", "unit": "bytes", "n": 1, "median": maxrss, "min": maxrss,
                           "max": maxrss, "value": maxrss,
                           "source": "kernel high-water mark (wait4 ru_maxrss) of the largest process"})
    return status, records, notes


def _summary(values):
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values),
            "value": max(values)}


UNITS = {"rss": ("memory", "bytes"), "mem": ("memory", "bytes"), "mem_device": ("memory", "bytes"),
         "util": ("utilisation", "%"), "power": ("power", "W"), "host_energy": ("energy_counter", "J")}


def _records(cmd, s, wall, rc, status, energy, notes):
    recs = []
    for name, pts in s.series.items():
        if not pts:
            continue
        proc = "host" if name.startswith(("rss", "host")) else name.split("_")[0]
        kind = name.split("_", 1)[1] if proc != "host" else name
        metric, unit = UNITS.get(kind, UNITS.get(name.split("_")[0], ("value", "")))
        if name.startswith("rss_node"):
            metric, unit = "memory", "bytes"
        r = {"type": "record", "benchmark": "profile", "op": name, "processor": proc, "metric": metric,
             "unit": unit, **_summary([v for _, v in pts]), "t": [round(t, 4) for t, _ in pts],
             "samples": [v for _, v in pts]}
        if name == "rss" or name.startswith("rss_node"):
            r["source"] = f"sampled every {s.period * 1e3:g} ms: a peak between samples is missed"
        if name.endswith("_mem"):
            r["source"] = "NVML per-process (the driver may not count managed memory here)"
        if name.endswith("_mem_device"):
            r["source"] = "device used memory minus the baseline before the start (other processes included)"
        recs.append(r)
    for k, j in energy.items():
        recs.append({"type": "record", "benchmark": "profile", "op": "energy", "processor": k, "metric": "energy",
                     "unit": "J", "n": 1, "median": j, "min": j, "max": j, "value": j})
    overhead = s.cpu_s / wall if wall > 0 else 0.0
    recs.append({"type": "record", "benchmark": "profile", "op": "run", "processor": "host", "metric": "wall_time",
                 "unit": "s", "n": 1, "median": wall, "min": wall, "max": wall, "value": wall,
                 "command": " ".join(cmd), "exit_status": status,
                 "signal": signal.Signals(-rc).name if rc < 0 else None, "samples_taken": s.samples,
                 "period_s": s.period, "sampler_cpu_s": round(s.cpu_s, 4), "sampler_overhead": round(overhead, 5),
                 "notes": notes})
    return recs


def print_summary(records, out=sys.stderr):
    run = next(r for r in records if r["op"] == "run")
    out.write(f"umscope profile: {run['command']}: exit {run['exit_status']}"
              f"{' (' + run['signal'] + ')' if run.get('signal') else ''}, {run['median']:.2f} s, "
              f"{run['samples_taken']} samples every {run['period_s'] * 1e3:g} ms, sampler CPU "
              f"{100 * run['sampler_overhead']:.2f}% of the run\n")
    for r in records:
        if r["op"] in ("run",):
            continue
        v = r["max"]
        text = f"{v / 2**20:.1f} MiB" if r["unit"] == "bytes" else f"{v:.4g} {r['unit']}"
        what = "total" if r["op"] == "energy" else "peak" if r["op"] == "rss_peak" else "sampled peak"
        out.write(f"  {r['op']:<16} {what} {text}" + (f"  [{r['source']}]" if r.get("source") else "") + "\n")
    for n in run.get("notes") or []:
        out.write(f"  note: {n}\n")
