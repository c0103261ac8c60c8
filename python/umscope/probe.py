"""The capability probe: what this machine's processors, memories and
software can do. The native runner reports what CUDA sees; the rest (OS,
NUMA, THP, UVM parameters, CPU, NVML link facts) is read here."""

import os
import platform
import socket
from pathlib import Path

from umscope import __version__, native, nvml
from umscope.store import default_store_path


def _read(path, default=""):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


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
    packages = {_read(p) for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id")}
    cores = {(_read(p.parent / "physical_package_id"), _read(p))
             for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/core_id")}
    return {"model": model or platform.processor() or platform.machine(),
            "arch": platform.machine(), "logical_cpus": os.cpu_count(),
            "allowed_cpus": len(os.sched_getaffinity(0)),
            "physical_cores": len(cores) or None, "sockets": len(packages) or None, "caches": caches}


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


def uvm_params() -> dict:
    base = Path("/sys/module/nvidia_uvm/parameters")
    if not base.exists():
        return {"readable": False, "why": "nvidia_uvm module not loaded or /sys not visible"}
    params = {}
    for p in sorted(base.iterdir()):
        params[p.name] = _read(p, None)
    return {"readable": True, "params": params}


def probe() -> dict:
    info = native.native_info()
    gpus = info.get("gpus", [])
    use_nvml = bool(gpus) and nvml.available()
    addressing = gpus[0]["addressing"] if gpus else "none"
    return {
        "umscope_version": __version__,
        "host": {
            "hostname": socket.gethostname(),
            "kernel": platform.release(),
            "os": _read("/etc/os-release").split("PRETTY_NAME=")[-1].split("\n")[0].strip('"') or platform.system(),
            "python": platform.python_version(),
            "page_size": os.sysconf("SC_PAGE_SIZE"),
            "thp": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/enabled")),
            "thp_defrag": _bracketed(_read("/sys/kernel/mm/transparent_hugepage/defrag")),
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
        },
        "gpus": [dict(g, link=nvml.device_info(g["pci_bus_id"]) if use_nvml else None) for g in gpus],
        "addressing": addressing,
        "uvm": uvm_params(),
        "store": str(default_store_path()),
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
