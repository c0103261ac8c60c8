"""NVML through ctypes, loaded only when asked for: the link generation and
width, memory clock and bus width the probe and the bounds need, and the
per-process memory and utilisation the profiler samples. Nothing here is
required: every call returns None where NVML or the value is unavailable."""

import ctypes
import functools

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


@functools.lru_cache(maxsize=None)
def _lib():
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.nvmlInit_v2() == 0:
            return lib
    return None


def available() -> bool:
    return _lib() is not None


@functools.lru_cache(maxsize=None)
def _handle(index):
    """A device handle from NVML's index or, better, a PCI bus id string
    (CUDA and NVML may number GPUs differently). Looked up once per device:
    the profiler's sampler asks several times every period."""
    lib = _lib()
    if lib is None:
        return None
    h = ctypes.c_void_p()
    if isinstance(index, str):
        rc = lib.nvmlDeviceGetHandleByPciBusId_v2(index.encode(), ctypes.byref(h))
    else:
        rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(h))
    return h if rc == 0 else None


def _uint(fn_name: str, index: int, *extra):
    lib, h = _lib(), _handle(index)
    if h is None:
        return None
    v = ctypes.c_uint()
    fn = getattr(lib, fn_name, None)
    if fn is None or fn(h, *extra, ctypes.byref(v)) != 0:
        return None
    return int(v.value)


def driver_version():
    lib = _lib()
    if lib is None:
        return None
    buf = ctypes.create_string_buffer(96)
    if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) != 0:
        return None
    return buf.value.decode()


def device_count() -> int:
    lib = _lib()
    n = ctypes.c_uint()
    if lib is None or lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0:
        return 0
    return int(n.value)


def device_info(index) -> dict:
    """Link and memory facts of a GPU (NVML index or PCI bus id)."""
    return {
        "pcie_gen_current": _uint("nvmlDeviceGetCurrPcieLinkGeneration", index),
        "pcie_width_current": _uint("nvmlDeviceGetCurrPcieLinkWidth", index),
        "pcie_gen_max": _uint("nvmlDeviceGetMaxPcieLinkGeneration", index),
        "pcie_width_max": _uint("nvmlDeviceGetMaxPcieLinkWidth", index),
        "gpu_pcie_gen_max": _uint("nvmlDeviceGetGpuMaxPcieLinkGeneration", index),
        "mem_bus_width_bits": _uint("nvmlDeviceGetMemoryBusWidth", index),
        "mem_clock_max_mhz": _uint("nvmlDeviceGetMaxClockInfo", index, ctypes.c_int(NVML_CLOCK_MEM)),
        "sm_clock_max_mhz": _uint("nvmlDeviceGetMaxClockInfo", index, ctypes.c_int(NVML_CLOCK_SM)),
        "sm_clock_mhz": _uint("nvmlDeviceGetClockInfo", index, ctypes.c_int(NVML_CLOCK_SM)),
        "mem_clock_mhz": _uint("nvmlDeviceGetClockInfo", index, ctypes.c_int(NVML_CLOCK_MEM)),
    }


def memory(index: int):
    lib, h = _lib(), _handle(index)
    if h is None:
        return None
    m = _Memory()
    if lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) != 0:
        return None
    return {"total": m.total, "free": m.free, "used": m.used}


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2/v3 layout)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def processes(index):
    """{pid: GPU memory bytes} of the compute processes NVML sees on a device, or None.
    In a container NVML may see none: callers fall back to the device total."""
    lib, h = _lib(), _handle(index)
    if h is None:
        return None
    fn = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
    if fn is None:
        return None
    count = ctypes.c_uint(64)
    buf = (_ProcessInfo * 64)()
    if fn(h, ctypes.byref(count), buf) != 0:
        return None
    return {int(buf[i].pid): int(buf[i].usedGpuMemory) for i in range(count.value)}


def utilization(index):
    lib, h = _lib(), _handle(index)
    if h is None:
        return None
    u = _Utilization()
    if lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)) != 0:
        return None
    return {"gpu": int(u.gpu), "memory": int(u.memory)}


def power_w(index):
    mw = _uint("nvmlDeviceGetPowerUsage", index)
    return None if mw is None else mw / 1000.0


def energy_j(index):
    """Energy since the driver loaded, in joules (Volta and later), or None."""
    lib, h = _lib(), _handle(index)
    if h is None:
        return None
    v = ctypes.c_ulonglong()
    fn = getattr(lib, "nvmlDeviceGetTotalEnergyConsumption", None)
    if fn is None or fn(h, ctypes.byref(v)) != 0:
        return None
    return v.value / 1000.0
