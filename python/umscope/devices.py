"""Which GPUs a run measures and where its processes sit.

`--device N` makes GPU N the GPU under test everywhere (bounds, free memory,
addressing, the run's GPU column); `--devices all|0,1,...` runs each
single-GPU case once per GPU; `--placement local|remote|none|sweep` chooses
umbench's CPU pinning and NUMA binding (local: the GPU's own CPUs and node,
the default; remote: another socket's; none: the OS's; sweep: all three)."""

from umscope.errors import UsageError
from umscope.suite import Case

PLACEMENTS = ("local", "remote", "none", "sweep")
# Families that measure no GPU: one run is enough, whatever --devices says.
_NOT_PER_GPU = {"cpu-stream", "selftest", "profile"}


def parse_devices(text, fingerprint) -> list:
    """'all' or '0,1' -> GPU ordinals, each checked against the probe (where it saw GPUs)."""
    present = [g["device"] for g in fingerprint.get("gpus") or []]
    if text is None:
        return []
    if text.strip() == "all":
        return present
    from umscope import validate
    out = validate.devices(text)
    for d in out:
        if present and d not in present:
            raise UsageError(f"--devices: no GPU {d} (this machine has {', '.join(map(str, present))})")
    return out


def check_device(device, fingerprint):
    present = [g["device"] for g in fingerprint.get("gpus") or []]
    if device is None:
        return
    if device < 0:
        raise UsageError("--device must be 0 or more")
    if present and device not in present:
        raise UsageError(f"--device {device}: no such GPU (this machine has {', '.join(map(str, present))})")


def _mentions_peer(case, device) -> bool:
    return f"peer:{device}" in (case.kind, case.params.get("dst"))


def expand(cases, devices=None, placement=None) -> list:
    """One case per GPU of `devices` (cases that name their own device are kept as they are; a case
    whose memory is the GPU's own peer:N is dropped for that GPU), then one per placement for sweep."""
    out = []
    for c in cases:
        if not devices or "device" in c.params or c.benchmark in _NOT_PER_GPU:
            out.append(c)
            continue
        for d in devices:
            if not _mentions_peer(c, d):
                out.append(Case(c.benchmark, c.kind, dict(c.params, device=str(d)), c.timeout))
    if placement == "sweep":
        out = [Case(c.benchmark, c.kind, dict(c.params, placement=p), c.timeout) if "placement" not in c.params
               else c for c in out for p in ("none", "local", "remote")]
        seen, unique = set(), []
        for c in out:
            if c.case_id not in seen:
                seen.add(c.case_id)
                unique.append(c)
        out = unique
    return out


def select(fingerprint, args, cases):
    """Applies --device/--devices/--placement: the fingerprint names the GPU under test and the GPUs
    measured; returns (fingerprint, cases)."""
    device = getattr(args, "device", 0) or 0
    check_device(device, fingerprint)
    devices = parse_devices(getattr(args, "devices", None), fingerprint)
    placement = getattr(args, "placement", None)
    if placement is not None and placement not in PLACEMENTS:
        raise UsageError(f"--placement is one of {', '.join(PLACEMENTS)}, got {placement!r}")
    fp = dict(fingerprint, device=device, devices=devices or [device])
    g = next((g for g in fingerprint.get("gpus") or [] if g.get("device") == device), None)
    if g:
        fp["addressing"] = g.get("addressing", fp.get("addressing"))
    return fp, expand(cases, devices, placement)


def gpu_column(fingerprint):
    """The run's GPU column: the measured GPU's name, or each measured GPU as 'N: name'."""
    gpus = {g["device"]: g["name"] for g in fingerprint.get("gpus") or []}
    if not gpus:
        return None
    devices = fingerprint.get("devices") or [fingerprint.get("device", 0)]
    names = [(d, gpus[d]) for d in devices if d in gpus]
    if not names:
        return None
    if len(gpus) == 1:
        return names[0][1]
    return ", ".join(f"{d}: {n}" for d, n in names)
