"""The capability probe: what this machine's processors, memories and
software can do. The native runner reports what CUDA sees; the rest (OS,
NUMA, THP, UVM parameters, CPU, NVML link facts) is read here.

What Grace Hopper adds is read where the machine offers it, each with its source: the NVLink-C2C link
and its bound (NVML), the base page and huge page sizes (64 KiB pages on Grace's 64k kernels), hwmon
power of the module, Grace and its rails (ACPI power meters), the Hopper GPU's power (NVML), and the
kernel settings the studies set (kernel.numa_balancing, init_on_alloc). The functions that read files
take `root` (default "/") so that tests can give them a fake /sys and /proc tree."""

import os
import platform
import socket
import sys
from pathlib import Path

from umscope import __version__, native, nvml, provenance
from umscope.energy import hwmon_power, read_text as _read, under_root as _at
from umscope.store import default_store_path


def _bracketed(text):
    """'always [madvise] never' -> 'madvise'."""
    if "[" in text and "]" in text:
        return text[text.index("[") + 1:text.index("]")]
    return text or None


def _cpu_list(text):
    cpus = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


def cpu_info() -> dict:
    model = None
    for line in _read("/proc/cpuinfo").splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("model name", "Model", "CPU part") and val.strip():
            model = val.strip()
            break
    caches, seen = [], set()
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")) if base.exists() else []:
        level, ctype, size = _read(idx / "level"), _read(idx / "type"), _read(idx / "size")
        if (level, ctype) in seen or not size:
            continue
        seen.add((level, ctype))
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        caches.append({"level": int(level), "type": ctype,
                       "bytes": int(size.rstrip("KMG")) * mult,
                       "line_bytes": int(_read(idx / "coherency_line_size", "0") or 0)})
    llc = _llc_instances(max((c["level"] for c in caches if c["type"] != "Instruction"), default=0))
    packages = {_read(p) for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id")}
    cores = {(_read(p.parent / "physical_package_id"), _read(p))
             for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/core_id")}
    return {"model": model or platform.processor() or platform.machine(),
            "arch": platform.machine(), "logical_cpus": os.cpu_count(),
            "allowed_cpus": len(os.sched_getaffinity(0)),
            "physical_cores": len(cores) or None, "sockets": len(packages) or None, "caches": caches,
            "llc_instances": llc}


def _llc_instances(level) -> list:
    """Each instance of the last-level cache (sysfs shared_cpu_list): its CPUs and bytes, so that CPU streams
    can be sized to the cache the threads that run can reach (one thread: its own instance)."""
    out, seen = [], set()
    for idx in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index*")):
        if _read(idx / "level") != str(level) or _read(idx / "type") == "Instruction":
            continue
        cpus, size = _read(idx / "shared_cpu_list"), _read(idx / "size")
        if not cpus or not size or cpus in seen:
            continue
        seen.add(cpus)
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        out.append({"cpus": _cpu_list(cpus), "bytes": int(size.rstrip("KMG")) * mult})
    return out


def numa_info() -> list:
    nodes = []
    for d in sorted(Path("/sys/devices/system/node").glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        mem = 0
        for line in _read(d / "meminfo").splitlines():
            if "MemTotal:" in line:
                mem = int(line.split()[-2]) * 1024
        nodes.append({"id": int(d.name[4:]), "mem_bytes": mem, "cpus": _cpu_list(_read(d / "cpulist"))})
    return nodes


def meminfo() -> dict:
    out = {}
    for line in _read("/proc/meminfo").splitlines():
        key, _, val = line.partition(":")
        if key in ("MemTotal", "MemAvailable", "HugePages_Total", "Hugepagesize"):
            parts = val.split()
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return out


def page_sizes(root="/", base=None) -> dict:
    """The base page (sysconf; 64 KiB on Grace's 64k kernels), the transparent huge page's PMD size
    (512 MiB with 64 KiB pages, 2 MiB with 4 KiB) and the hugetlb sizes the kernel offers."""
    pmd = _read(_at(root, "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"))
    hugetlb = []
    for d in _at(root, "/sys/kernel/mm/hugepages").glob("hugepages-*kB"):
        kb = d.name[len("hugepages-"):-2]
        if kb.isdigit():
            hugetlb.append(int(kb) * 1024)
    return {"base": base or os.sysconf("SC_PAGE_SIZE"), "base_source": "sysconf(_SC_PAGESIZE)",
            "thp_pmd": int(pmd) if pmd.isdigit() else None, "hugetlb": sorted(hugetlb)}


def kernel_settings(root="/", release=None) -> dict:
    """kernel.numa_balancing (/proc/sys) and init_on_alloc (the kernel command line, else the kernel's
    build default CONFIG_INIT_ON_ALLOC_DEFAULT_ON from /boot/config-RELEASE), each with where it was read;
    None with the reason where neither says."""
    out = {}
    nb = _read(_at(root, "/proc/sys/kernel/numa_balancing"))
    out["numa_balancing"] = int(nb) if nb.isdigit() else None
    out["numa_balancing_source"] = "/proc/sys/kernel/numa_balancing" if nb.isdigit() else "not readable"
    cmdline = _read(_at(root, "/proc/cmdline")).split()
    given = [w.split("=", 1)[1] for w in cmdline if w.startswith("init_on_alloc=")]
    release = release or platform.release()
    config = _at(root, f"/boot/config-{release}")
    if given:
        out["init_on_alloc"] = given[-1] in ("1", "on", "y", "Y")
        out["init_on_alloc_source"] = f"/proc/cmdline: init_on_alloc={given[-1]}"
    else:
        text = _read(config)
        if "CONFIG_INIT_ON_ALLOC_DEFAULT_ON" in text:
            out["init_on_alloc"] = "CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y" in text.splitlines()
            out["init_on_alloc_source"] = f"/boot/config-{release} (build default; not on the command line)"
        else:
            out["init_on_alloc"] = None
            out["init_on_alloc_source"] = f"not on /proc/cmdline, and no /boot/config-{release} says"
    return out


def power(root="/", gpus=(), use_nvml=False) -> dict:
    """Power now: the module, Grace and its rails from hwmon, and each GPU's from NVML (on Grace Hopper,
    the Hopper side: hwmon has no sensor of its own for it)."""
    return {"hwmon": hwmon_power(root),
            "gpus": [{"device": g["device"], "watts": nvml.power_w(g["pci_bus_id"]), "source": "NVML nvmlDeviceGetPowerUsage"}
                     for g in gpus] if use_nvml else []}


def uvm_params() -> dict:
    base = Path("/sys/module/nvidia_uvm/parameters")
    if not base.exists():
        return {"readable": False, "why": "nvidia_uvm module not loaded or /sys not visible"}
    params = {}
    for p in sorted(base.iterdir()):
        params[p.name] = _read(p, None)
    return {"readable": True, "params": params}


def _sysfs_pci(bus_id):
    """The GPU's PCI device directory in sysfs ('0000:1b:00.0' form, lower case)."""
    return Path("/sys/bus/pci/devices") / nvml.bus_key(bus_id)


def gpu_locality(bus_id) -> dict:
    """Local CPUs and NUMA node of a GPU: NVML's CPU affinity and NUMA id where it answers, the
    PCI device's sysfs local_cpulist and numa_node otherwise; each with its source."""
    out = {"cpus": None, "numa_node": None, "source": None}
    nv = nvml.locality(bus_id) if nvml.available() else {}
    if nv.get("cpus"):
        out.update(cpus=nv["cpus"], source="NVML nvmlDeviceGetCpuAffinity")
    if nv.get("numa_node") is not None and nv["numa_node"] >= 0:
        out["numa_node"] = nv["numa_node"]
    d = _sysfs_pci(bus_id)
    if out["cpus"] is None and _read(d / "local_cpulist"):
        out.update(cpus=_cpu_list(_read(d / "local_cpulist")), source=f"sysfs {d}/local_cpulist")
    if out["numa_node"] is None:
        node = _read(d / "numa_node", "-1")
        out["numa_node"] = int(node) if node.lstrip("-").isdigit() and int(node) >= 0 else None
    return out


def topology(gpus) -> dict:
    """Every GPU's locality and the link between every ordered pair: NVLink generation and link count
    or the PCIe common ancestor (NVML), and the P2P capabilities (NVML and the CUDA runtime)."""
    use_nvml = bool(gpus) and nvml.available()
    links = {g["device"]: nvml.nvlinks(g["pci_bus_id"]) if use_nvml else [] for g in gpus}
    out = {"nvml": use_nvml, "why_no_nvml": None if use_nvml or not gpus else nvml.why_unavailable(),
           "gpus": [], "pairs": []}
    for g in gpus:
        loc = gpu_locality(g["pci_bus_id"])
        out["gpus"].append(dict(loc, device=g["device"], pci_bus_id=g["pci_bus_id"],
                                nvlinks=len(links[g["device"]])))
    for a in gpus:
        for b in gpus:
            if a["device"] == b["device"]:
                continue
            pair = (nvml.pair_link(a["pci_bus_id"], b["pci_bus_id"], links[a["device"]], links[b["device"]])
                    if use_nvml else {"type": None, "p2p": {}})
            cuda = next((p for p in a.get("peers") or [] if p.get("device") == b["device"]), None)
            if cuda:
                pair["cuda_p2p"] = {k: cuda.get(k) for k in ("access", "atomics", "rank")}
            out["pairs"].append(dict(pair, a=a["device"], b=b["device"]))
    return out


def select_gpu(fp, device=None):
    """The GPU a run measures: `device` (a CUDA ordinal), else the fingerprint's selected device
    (`fp['device']`, set from --device), else GPU 0; None where there is no such GPU."""
    if device is None:
        device = fp.get("device", 0) or 0
    for g in fp.get("gpus") or []:
        if g.get("device") == int(device):
            return g
    return None
# The batch scheduler's view of this job, where one runs it (kept in the run's fingerprint so
# that runs of many nodes can be told apart and gathered by job).
_SCHEDULER_VARS = {
    "slurm": ["SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_CLUSTER_NAME",
              "SLURM_JOB_NAME", "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT", "SLURM_JOB_NODELIST",
              "SLURM_JOB_NUM_NODES", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
              "SLURM_STEP_ID", "SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS"],
    "flux": ["FLUX_JOB_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES", "FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID",
             "FLUX_URI"],
    "pbs": ["PBS_JOBID", "PBS_JOBNAME", "PBS_QUEUE", "PBS_NODEFILE", "PBS_O_HOST", "PBS_TASKNUM",
            "PBS_NODENUM", "PMI_RANK"],
    "lsf": ["LSB_JOBID", "LSB_JOBNAME", "LSB_QUEUE", "LSB_HOSTS", "LSB_JOBINDEX"],
}


def scheduler(environ=None) -> dict:
    """{'name': 'slurm', 'job': id, 'vars': {...}} for the scheduler whose job this is, or {}."""
    environ = os.environ if environ is None else environ
    for name, keys in _SCHEDULER_VARS.items():
        found = {k: environ[k] for k in keys if environ.get(k)}
        if found:
            job = found.get(keys[0]) or next(iter(found.values()))
            return {"name": name, "job": job, "vars": found}
    return {}


def libraries() -> dict:
    """The run-time libraries umscope loads: the CUPTI tracer (and the libcupti it resolves to) and cuBLAS."""
    from umscope import profile as profiler
    tracer = profiler.tracer_path()
    return {"tracer": tracer, "cupti": profiler.cupti_path(tracer) if tracer else None,
            "cublas": native.cublas_path()}


def probe() -> dict:
    # The libraries are located (cuBLAS by loading it: 0.35 s on the H100 machine) while umbench reads the GPUs in
    # its own process: the same answers, one wait instead of two.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=1) as pool:
        libs = pool.submit(libraries)
        info = native.native_info()
        libs = libs.result()
    gpus = info.get("gpus", [])
    use_nvml = bool(gpus) and nvml.available()
    addressing = gpus[0]["addressing"] if gpus else "none"
    return {
        "umscope_version": __version__,
        "umscope_commit": provenance.commit(),  # as built into the package, never the cwd's repository
        "host": {
            "hostname": socket.gethostname(),
            "kernel": platform.release(),
            "os": _read("/etc/os-release").split("PRETTY_NAME=")[-1].split("\n")[0].strip('"') or platform.system(),
            "python": platform.python_version(),
            "page_size": os.sysconf("SC_PAGE_SIZE"),
            "thp": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/enabled")),
            "thp_defrag": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/defrag")),
            "pages": page_sizes(),
            "kernel_settings": kernel_settings(),
            "memory": meminfo(),
        },
        "cpu": cpu_info(),
        "numa": numa_info(),
        "cuda": {
            "built_with_cuda": info.get("built_with_cuda", False),
            "runtime_version": info.get("runtime_version"),
            "driver_version": info.get("driver_version"),
            "driver": nvml.driver_version() if gpus else None,
            "why_no_gpu": info.get("why_no_gpu"),
            **libs,
        },
        "gpus": [dict(g, link=nvml.device_info(g["pci_bus_id"]) if use_nvml else None,
                      c2c=nvml.c2c(g["pci_bus_id"]) if use_nvml else None) for g in gpus],
        "power": power("/", gpus, use_nvml),
        "addressing": addressing,
        "topology": topology(gpus),
        "uvm": uvm_params(),
        "store": str(default_store_path()),
        "scheduler": scheduler(),
    }


def cuda_version_text(v) -> str:
    if not v:
        return "none"
    return f"{v // 1000}.{(v % 1000) // 10}"


def probe_gpu() -> dict:
    """The probe, for scripts that measure a GPU: exits with the reason where there is none."""
    fp = probe()
    if not fp["gpus"]:
        raise SystemExit("no GPU: " + str(fp["cuda"].get("why_no_gpu")))
    return fp


class _CallableModule(type(sys.modules[__name__])):
    """The Python API's umscope.probe(): this module, callable (umscope.probe() == umscope.probe.probe())."""

    def __call__(self):
        return self.probe()


sys.modules[__name__].__class__ = _CallableModule
