"""NVML through NVIDIA's binding nvidia-ml-py (module `pynvml`), imported
only when asked for: the link generation and width, memory clock and bus
width the probe and the bounds need, the GPU-to-GPU and GPU-to-CPU topology,
and the per-process memory and utilisation the profiler samples. Nothing
here is required: every call returns None (or an empty answer) where NVML or
the value is unavailable, and `why_unavailable()` says why."""

import functools

# nvmlGpuP2PCapsIndex_t and nvmlGpuTopologyLevel_t as nvml.h numbers them (pynvml 13.610 spells
# NVML_P2P_CAPS_INDEX_READ as a one-element tuple, so the numbers are written here once).
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}
TOPOLOGY_LEVELS = {0: "internal (same board)", 10: "single PCIe switch", 20: "multiple PCIe switches",
                   30: "PCIe host bridge", 40: "CPU / NUMA node", 50: "system (across CPU sockets)"}
# nvmlNvlinkVersion_t -> NVLink generation.
NVLINK_GENERATIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
_NVLINK_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH


@functools.lru_cache(maxsize=None)
def _init():
    """(pynvml module or None, reason)."""
    try:
        import pynvml
    except ImportError as e:
        return None, f"nvidia-ml-py is not installed ({e})"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return None, f"NVML cannot start: {e}"
    except OSError as e:  # a broken libnvidia-ml
        return None, f"NVML cannot start: {e}"
    return pynvml, ""


def available() -> bool:
    return _init()[0] is not None


def why_unavailable() -> str:
    return _init()[1]


def _call(fn_name, *args):
    """pynvml.fn(*args), or None where NVML, the function or the value is unavailable."""
    nv = _init()[0]
    if nv is None:
        return None
    fn = getattr(nv, fn_name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except nv.NVMLError:
        return None


@functools.lru_cache(maxsize=None)
def _handle(index):
    """A device handle from NVML's index or, better, a PCI bus id string
    (CUDA and NVML may number GPUs differently). Looked up once per device:
    the profiler's sampler asks several times every period."""
    if isinstance(index, str):
        return _call("nvmlDeviceGetHandleByPciBusId", index)
    return _call("nvmlDeviceGetHandleByIndex", index)


def _on(fn_name, index, *extra):
    h = _handle(index)
    return None if h is None else _call(fn_name, h, *extra)


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def driver_version():
    v = _call("nvmlSystemGetDriverVersion")
    return None if v is None else _text(v)


def device_count() -> int:
    return _call("nvmlDeviceGetCount") or 0


def device_info(index) -> dict:
    """Link and memory facts of a GPU (NVML index or PCI bus id)."""
    nv = _init()[0]
    clk = (lambda n: getattr(nv, n)) if nv else (lambda n: None)
    return {
        "pcie_gen_current": _on("nvmlDeviceGetCurrPcieLinkGeneration", index),
        "pcie_width_current": _on("nvmlDeviceGetCurrPcieLinkWidth", index),
        "pcie_gen_max": _on("nvmlDeviceGetMaxPcieLinkGeneration", index),
        "pcie_width_max": _on("nvmlDeviceGetMaxPcieLinkWidth", index),
        "gpu_pcie_gen_max": _on("nvmlDeviceGetGpuMaxPcieLinkGeneration", index),
        "mem_bus_width_bits": _on("nvmlDeviceGetMemoryBusWidth", index),
        "mem_clock_max_mhz": _on("nvmlDeviceGetMaxClockInfo", index, clk("NVML_CLOCK_MEM")) if nv else None,
        "sm_clock_max_mhz": _on("nvmlDeviceGetMaxClockInfo", index, clk("NVML_CLOCK_SM")) if nv else None,
        "sm_clock_mhz": _on("nvmlDeviceGetClockInfo", index, clk("NVML_CLOCK_SM")) if nv else None,
        "mem_clock_mhz": _on("nvmlDeviceGetClockInfo", index, clk("NVML_CLOCK_MEM")) if nv else None,
    }


def memory(index):
    m = _on("nvmlDeviceGetMemoryInfo", index)
    return None if m is None else {"total": int(m.total), "free": int(m.free), "used": int(m.used)}


def processes(index):
    """{pid: GPU memory bytes} of the compute processes NVML sees on a device, or None.
    In a container NVML may see none: callers fall back to the device total. The binding picks
    the process-list layout the driver speaks."""
    procs = _on("nvmlDeviceGetComputeRunningProcesses", index)
    if procs is None:
        return None
    return {int(p.pid): int(p.usedGpuMemory or 0) for p in procs}


def utilization(index):
    u = _on("nvmlDeviceGetUtilizationRates", index)
    return None if u is None else {"gpu": int(u.gpu), "memory": int(u.memory)}


def power_w(index):
    mw = _on("nvmlDeviceGetPowerUsage", index)
    return None if mw is None else mw / 1000.0


def energy_j(index):
    """Energy since the driver loaded, in joules (Volta and later), or None."""
    mj = _on("nvmlDeviceGetTotalEnergyConsumption", index)
    return None if mj is None else mj / 1000.0


@functools.lru_cache(maxsize=None)
def _default_limit(index):
    """The board's default power limit (mW), a constant of the GPU: read once (the suite reads the limits
    around every case, and each NVML call took about 1 ms on 4 x H100: docs/suite-time.md)."""
    return _on("nvmlDeviceGetPowerManagementDefaultLimit", index)


def power_limits_w(index) -> dict:
    """The GPU's power management limit now and its default, in watts (each None where NVML cannot say).
    Read only: umscope never sets a limit."""
    now = _on("nvmlDeviceGetPowerManagementLimit", index)
    default = _default_limit(index)
    return {"limit_w": None if now is None else now / 1000.0,
            "default_w": None if default is None else default / 1000.0}


# --- topology ---------------------------------------------------------------

def pcie_bytes(index):
    """{'tx': bytes the GPU sent, 'rx': bytes it received} over PCIe since the driver started counting
    (field values NVML_FI_DEV_PCIE_COUNT_TX_BYTES / _RX_BYTES), or None where NVML or the GPU lacks them."""
    nv, h = _init()[0], _handle(index)
    if nv is None or h is None:
        return None
    ids = [getattr(nv, "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", None), getattr(nv, "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", None)]
    if None in ids:
        return None
    try:
        vals = nv.nvmlDeviceGetFieldValues(h, ids)
    except nv.NVMLError:
        return None
    if any(v.nvmlReturn != 0 for v in vals):
        return None
    return {"tx": int(vals[0].value.ullVal), "rx": int(vals[1].value.ullVal)}


# nvmlValueType_t -> the member of nvmlValue_t that holds it.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _fields(index, ids):
    """[value or None] of NVML field values (id, or (id, scope)) of a device; None where NVML has none."""
    nv, h = _init()[0], _handle(index)
    if nv is None or h is None:
        return None
    try:
        vals = nv.nvmlDeviceGetFieldValues(h, list(ids))
    except nv.NVMLError:
        return None
    return [getattr(v.value, _VALUE_MEMBER.get(int(v.valueType), "ullVal")) if v.nvmlReturn == 0 else None
            for v in vals]


def c2c(index):
    """The GPU's NVLink-C2C link to its CPU (Grace Hopper), or None where there is none or NVML cannot say:
    whether C2C mode is on (nvmlDeviceGetC2cModeInfoV), its links (NVML_FI_DEV_C2C_LINK_COUNT), each one's
    status (_GET_STATUS, 1 = active) and speed in MB/s (_GET_MAX_BW, scoped by link), and their sum over the
    active links in GB/s per direction: the link's bound."""
    nv = _init()[0]
    if nv is None:
        return None
    mode = _on("nvmlDeviceGetC2cModeInfoV", index)
    count = (_fields(index, [170]) or [None])[0]  # NVML_FI_DEV_C2C_LINK_COUNT
    if not count:
        return None
    per = _fields(index, [(f, i) for i in range(int(count)) for f in (171, 172)]) or []  # _GET_STATUS, _GET_MAX_BW
    links = [{"link": i, "active": per[2 * i] == 1, "mbps": per[2 * i + 1]} for i in range(len(per) // 2)]
    active = [lk for lk in links if lk["active"] and lk["mbps"]]
    return {"enabled": bool(mode.isC2cEnabled) if mode is not None else None, "links": int(count),
            "active_links": len(active), "per_link": links,
            "gbps": round(sum(lk["mbps"] for lk in active) / 1000, 1) if active else None,
            "source": "NVML field values C2C_LINK_COUNT, C2C_LINK_GET_STATUS, C2C_LINK_GET_MAX_BW"}


def bus_key(bus_id) -> str:
    """'00000000:1B:00.0' (NVML) and '0000:1b:00.0' (CUDA) -> '0000:1b:00.0', comparable."""
    parts = _text(bus_id or "").strip().lower().split(":")
    if len(parts) != 3:
        return ":".join(parts)
    try:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    except ValueError:
        return ":".join(parts)


def cpu_list(words, bits_per_word=64) -> list:
    """CPU numbers set in NVML's affinity bitmask (an array of unsigned longs)."""
    cpus = []
    for i, w in enumerate(words or []):
        for b in range(bits_per_word):
            if int(w) >> b & 1:
                cpus.append(i * bits_per_word + b)
    return cpus


def nvlinks(index) -> list:
    """Active NVLinks of a GPU: [{'link', 'version', 'remote_bus', 'remote_type'}]."""
    out = []
    nv = _init()[0]
    if nv is None or _handle(index) is None:
        return out
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _on("nvmlDeviceGetNvLinkState", index, link)
        if not state:  # down, absent, or NVLink not supported (None)
            continue
        pci = _on("nvmlDeviceGetNvLinkRemotePciInfo", index, link)
        out.append({"link": link, "version": _on("nvmlDeviceGetNvLinkVersion", index, link),
                    "remote_bus": bus_key(getattr(pci, "busId", "")) if pci is not None else None,
                    "remote_type": _on("nvmlDeviceGetNvLinkRemoteDeviceType", index, link)})
    return out


def locality(bus_id) -> dict:
    """CPUs and NUMA node near a GPU, from NVML (sysfs is the fallback in the probe)."""
    import os
    words = _on("nvmlDeviceGetCpuAffinity", bus_id, max(1, -(-(os.cpu_count() or 64) // 64)))
    numa = _on("nvmlDeviceGetNumaNodeId", bus_id)
    return {"cpus": cpu_list(words) if words is not None else None,
            "numa_node": int(numa) if numa is not None else None}


def pair_link(bus_a, bus_b, links_a, links_b) -> dict:
    """How GPU a reaches GPU b: NVLink (direct or through NVSwitches: generation and link count)
    or PCIe (NVML's common-ancestor level); and the P2P capabilities NVML reports."""
    out = {"type": None, "nvlinks": 0, "nvlink_version": None, "via": None, "common_ancestor": None,
           "p2p": {}}
    ha, hb = _handle(bus_a), _handle(bus_b)
    if ha is not None and hb is not None:
        level = _call("nvmlDeviceGetTopologyCommonAncestor", ha, hb)
        if level is not None:
            out["common_ancestor"] = {"level": int(level), "text": TOPOLOGY_LEVELS.get(int(level), str(level))}
        for name, idx in P2P_CAPS.items():
            st = _call("nvmlDeviceGetP2PStatus", ha, hb, idx)
            out["p2p"][name] = None if st is None else int(st) == 0
    direct = [l for l in links_a if l["remote_bus"] == bus_key(bus_b)]
    # Links into NVSwitches reach every GPU behind them; where NVML does not name the remote device
    # type, NVML's own "P2P over NVLink" status decides.
    def switched(links):
        return [l for l in links if l["remote_type"] == _NVLINK_SWITCH
                or (l["remote_type"] is None and out["p2p"].get("nvlink"))]
    if direct:
        out.update(type="NVLink", nvlinks=len(direct), via="direct", nvlink_version=direct[0]["version"])
    elif switched(links_a) and switched(links_b):
        sa = switched(links_a)
        out.update(type="NVLink", nvlinks=min(len(sa), len(switched(links_b))), via="NVSwitch",
                   nvlink_version=sa[0]["version"])
    if out["type"] is None and out["common_ancestor"]:
        out.update(type="PCIe", via=out["common_ancestor"]["text"])
    if out["nvlink_version"] is not None:
        out["nvlink_generation"] = NVLINK_GENERATIONS.get(int(out["nvlink_version"]))
    return out
