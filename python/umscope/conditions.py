"""The conditions of a measurement: the GPU's SM and memory clocks, its clock-event (throttle) reasons,
temperature, power and the other processes using it, read through NVML (nvidia-ml-py, imported lazily)
before and after each case. A case measured while the GPU was throttled (for any reason but idling) or shared
with another process is flagged in the summary and the report. Without NVML each reading says
"unavailable" with the reason."""

import os

from umscope import nvml

# NVML's clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Not a throttle of the measurement: the GPU had nothing to do when it was read.
BENIGN = {"gpu_idle"}

_state = {}  # the GPUs' constants read once (their maximum SM clock)


def _nvml():
    """The pynvml module, initialised once (umscope.nvml), or raises RuntimeError with the reason."""
    mod, why = nvml._init()
    if mod is None:
        raise RuntimeError(why)
    return mod


def reasons_of(mask: int) -> list:
    return [name for bit, name in sorted(REASONS.items()) if mask & bit] + (
        [f"unknown_0x{mask & ~sum(REASONS):x}"] if mask & ~sum(REASONS) else [])


def read(device: int = 0, bus_id: str = None) -> dict:
    """One reading of GPU `device`, or {'available': False, 'reason': ...}. With bus_id (the CUDA device's PCI
    bus id, from the probe) the GPU is found by it; without, `device` is taken as NVML's index, which is CUDA's
    device only where both number the GPUs alike (not under CUDA_VISIBLE_DEVICES=3, for one)."""
    try:
        nv = _nvml()
    except RuntimeError as e:
        return {"available": False, "reason": str(e)}
    out = {"available": True, "device": device}
    if bus_id:
        out["pci_bus_id"] = bus_id
    # The handle is looked up once per GPU (nvml._handle; the suite reads the case's GPU around every case).
    key = bus_id or device
    h = nvml._handle(key)
    if h is None:
        return {"available": False, "reason": f"no NVML device {bus_id or device}"}

    def get(key, fn, *consts, scale=1.0):  # NVML's function and constants by name: an older binding may lack them
        try:
            v = getattr(nv, fn)(h, *(getattr(nv, c) for c in consts))
            out[key] = v * scale if scale != 1.0 else v
        except Exception as e:
            out.setdefault("unavailable", {})[key] = str(e)

    get("sm_clock_mhz", "nvmlDeviceGetClockInfo", "NVML_CLOCK_SM")
    get("mem_clock_mhz", "nvmlDeviceGetClockInfo", "NVML_CLOCK_MEM")
    maxima = _state.setdefault("max_clock", {})  # a constant of the GPU: read once
    if key not in maxima:
        get("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_SM")
        if "sm_clock_max_mhz" in out:
            maxima[key] = out["sm_clock_max_mhz"]
    else:
        out["sm_clock_max_mhz"] = maxima[key]
    get("temperature_c", "nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU")
    get("power_w", "nvmlDeviceGetPowerUsage", scale=1e-3)
    try:
        events = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                  or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons"))
        mask = int(events(h))
        out["throttle_mask"] = mask
        out["throttle_reasons"] = reasons_of(mask)
    except Exception as e:
        out.setdefault("unavailable", {})["throttle_reasons"] = str(e)
    pids = set()
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            pids |= {p.pid for p in getattr(nv, fn)(h)}
        except Exception as e:
            out.setdefault("unavailable", {})["processes"] = str(e)
    out["processes"] = sorted(pids)
    return out


def flags(before: dict, after: dict, own_pids=()) -> list:
    """Why a case's figures may not be representative, from its readings: ['throttled before: sw_power_cap',
    'shared: pids 123 456', ...]; [] when neither reading shows anything (or NVML was unavailable)."""
    own = set(own_pids) | {os.getpid()}
    out = []
    for when, r in (("before", before), ("after", after)):
        if not r or not r.get("available"):
            continue
        bad = [x for x in r.get("throttle_reasons") or [] if x not in BENIGN]
        if bad:
            out.append(f"throttled {when}: {', '.join(bad)}")
    others = sorted({p for r in (before, after) if r and r.get("available") for p in r.get("processes") or []} - own)
    if others:
        out.append("shared: other processes on the GPU (pids " + " ".join(str(p) for p in others) + ")")
    return out


def attach(records: list, before: dict, after: dict, own_pids=()) -> list:
    """Puts the readings and their flags into every record of a case."""
    f = flags(before, after, own_pids)
    for r in records:
        r["conditions"] = {"before": before, "after": after, "flags": f}
    return records


def flagged_cases(records) -> dict:
    """{case_id: flags} over store rows (conditions in extra) or flat records."""
    out = {}
    for r in records:
        c = r.get("conditions") or (r.get("extra") or {}).get("conditions") or {}
        if c.get("flags"):
            out.setdefault(r.get("case_id") or r.get("case") or "?", c["flags"])
    return out


def report_html(records, esc) -> str:
    """The report's conditions section: flagged cases, or a line saying none were (or that NVML was absent)."""
    flagged = flagged_cases(records)
    readings = [(r.get("extra") or {}).get("conditions") for r in records]
    readings = [c for c in readings if c]
    if not readings:
        return "<p class=note>These records carry no NVML readings of the GPU's conditions.</p>"
    if not any((c.get("before") or {}).get("available") for c in readings):
        why = (readings[0].get("before") or {}).get("reason", "")
        return f"<p class=note>GPU conditions unavailable: {esc(why)}.</p>"
    if not flagged:
        return ("<p class=note>No case was measured while the GPU was throttled (other than idle) or shared with "
                "another process (NVML readings before and after each case).</p>")
    return ("<p class=note>Measured while the GPU was throttled or shared (NVML readings before and after each case): "
            "these figures may be low.</p><table><tr><th>case</th><th>conditions</th></tr>" + "".join(
                f"<tr><td>{esc(cid)}</td><td class=flag>{esc('; '.join(f))}</td></tr>" for cid, f in flagged.items())
            + "</table>")
