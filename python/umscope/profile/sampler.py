"""The sampler of `umscope profile`: resident set size of the program's process tree (per NUMA node where
there are several), GPU memory, utilisation and power (NVML), host energy (RAPL), every period, on a thread
that measures its own CPU time."""

import os
import re
import threading
import time
from pathlib import Path

from umscope import energy, nvml
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
    return [d / "energy_uj" for d in energy.rapl_domains()]


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
