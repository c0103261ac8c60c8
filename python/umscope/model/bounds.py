"""Datapath bounds: the theoretical peak each measurement can reach.

A machine description gives the peak of each datapath in GB/s:
`gpu_memory`, `host_memory`, `h2d` and `d2h` (the CPU-GPU link per
direction: PCIe or NVLink-C2C). It is filled from the probe where possible
(memory clock x bus width from the device, PCIe generation x width from NVML),
completed by the packaged description that matches the GPU, and overridden by
a file the user names (`--machine FILE`).

A measurement uses resources: bytes read and written in GPU or host memory,
bytes crossing the link in each direction. Its bound is the bytes it reports
divided by the time the busiest resource needs at its peak.

Every peak carries its source, one of `probe: ...` (derived from the device
in this run), `datasheet: ...`, `spec: ...`, `paper: ...` (a packaged
description's per-datapath `sources`), or `file: PATH` (the user's
description; its own `sources` entry where it gives one). annotate() copies
the limiting datapath's source into each record as `bound_source`. A copy between
two host buffers through the GPU crosses the link twice (once each way); a
device-to-device copy reads and writes GPU memory."""

from pathlib import Path

import yaml

from umscope.errors import UsageError

MACHINES = Path(__file__).resolve().parent.parent / "machines"
# PCIe: (GT/s per lane, encoding efficiency) per generation.
_PCIE = {1: (2.5, 0.8), 2: (5.0, 0.8), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130),
         6: (64.0, 242 / 256)}
# NVLink: GB/s per link per direction by generation (NVIDIA's datasheets: V100 6 x 25, A100 12 x 25,
# H100/H200 18 x 25, B200 18 x 50; NVLink 1 on P100, 4 x 20).
_NVLINK_GBPS = {"1.0": 20.0, "2.0": 25.0, "2.2": 25.0, "3.0": 25.0, "3.1": 25.0, "4.0": 25.0, "5.0": 50.0}


def _ops() -> dict:
    """(reads, writes) of array-sized traffic per stream operation: the runner's own table
    (native/include/umscope/traffic.hpp, exported by `umbench list --json`)."""
    from umscope import registry
    return registry.stream_ops()


def packaged() -> dict:
    out = {}
    for f in sorted(MACHINES.glob("*.yaml")):
        out[f.stem] = yaml.safe_load(f.read_text())
    return out


def pcie_gbps(gen, width):
    if not gen or not width or gen not in _PCIE:
        return None
    rate, enc = _PCIE[gen]
    return round(rate * width * enc / 8, 2)


def _selected(fp):
    """The GPU under test: fp['device'] (set from --device), else GPU 0."""
    want = int(fp.get("device", 0) or 0)
    gpus = fp.get("gpus") or []
    return next((g for g in gpus if g.get("device") == want), gpus[0] if gpus else None)


def peer_link(fp, a, b):
    """(GB/s per direction, source) of the link from GPU a to GPU b from the probe's topology, or None."""
    gpus = {g.get("device"): g for g in fp.get("gpus") or []}
    pair = next((p for p in (fp.get("topology") or {}).get("pairs", []) if p.get("a") == a and p.get("b") == b), None)
    if not pair:
        return None
    gen = pair.get("nvlink_generation")
    if pair.get("type") == "NVLink" and pair.get("nvlinks") and gen in _NVLINK_GBPS:
        rate = _NVLINK_GBPS[gen]
        via = " through NVSwitch" if pair.get("via") == "NVSwitch" else ""
        return (round(pair["nvlinks"] * rate, 1),
                f"probe: {pair['nvlinks']} NVLink{gen.split('.')[0]} links{via} x {rate:g} GB/s (datasheet rate)")
    if pair.get("type") == "PCIe":
        bws = []
        for d in (a, b):
            link = (gpus.get(d) or {}).get("link") or {}
            bws.append((pcie_gbps(link.get("pcie_gen_max"), link.get("pcie_width_max")), link))
        if all(bw for bw, _ in bws):
            bw, link = min(bws, key=lambda x: x[0])
            return bw, (f"probe: PCIe gen {link.get('pcie_gen_max')} x{link.get('pcie_width_max')} "
                        f"(via {pair.get('via')})")
    return None


def from_probe(fp) -> dict:
    """Datapath peaks the probe can derive, each with where it came from."""
    paths = {}
    g = _selected(fp)
    if g:
        for b in sorted({p.get("b") for p in (fp.get("topology") or {}).get("pairs", []) if p.get("a") == g["device"]}):
            pl = peer_link(fp, g["device"], b)
            if pl and ("peer_link" not in paths or pl[0] < paths["peer_link"][0]):
                paths["peer_link"] = pl  # the slowest peer: every pair of the node within its bound
        link = g.get("link") or {}
        mhz = link.get("mem_clock_max_mhz") or (g.get("mem_clock_khz") or 0) / 1000
        bits = link.get("mem_bus_width_bits") or g.get("mem_bus_bits")
        if mhz and bits:
            # HBM transfers twice per memory clock.
            paths["gpu_memory"] = (round(2 * mhz * 1e6 * bits / 8 / 1e9, 1),
                                   f"probe: 2 x {mhz:.0f} MHz x {bits} bit")
        bw = pcie_gbps(link.get("pcie_gen_max"), link.get("pcie_width_max"))
        if bw and g.get("addressing") != "ATS":
            src = f"probe: PCIe gen {link.get('pcie_gen_max')} x{link.get('pcie_width_max')}"
            paths["h2d"] = (bw, src)
            paths["d2h"] = (bw, src)
        c2c = g.get("c2c") or {}
        if c2c.get("gbps"):  # Grace Hopper: the CPU-GPU link is NVLink-C2C, not PCIe
            src = (f"probe: NVLink-C2C, {c2c['active_links']} of {c2c['links']} links active, "
                   f"their NVML speeds summed")
            paths["h2d"] = (c2c["gbps"], src)
            paths["d2h"] = (c2c["gbps"], src)
    return paths


def host_facts(fp, expected_sensors=()) -> dict:
    """What the probe read of the host beside the datapaths, each (value, source): the base page and
    huge page sizes, kernel.numa_balancing, init_on_alloc, the CPU-GPU link (NVLink-C2C) and the power
    sensors (hwmon by what they measure; NVML for the GPU). expected_sensors (a description's
    `power_sensors`) adds the ones it names that this machine lacks, as `power_sensors_missing`."""
    host = fp.get("host") or {}
    pages, ks = host.get("pages") or {}, host.get("kernel_settings") or {}
    out = {}
    if pages.get("base"):
        out["base_page"] = (pages["base"], f"probe: {pages.get('base_source')}")
    if pages.get("thp_pmd"):
        out["thp_pmd"] = (pages["thp_pmd"], "probe: /sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
    for k in ("numa_balancing", "init_on_alloc"):
        if ks.get(k) is not None:
            out[k] = (ks[k], f"probe: {ks.get(k + '_source')}")
    g = _selected(fp)
    c2c = (g or {}).get("c2c") or {}
    if c2c.get("links"):
        out["c2c_links"] = ((c2c["active_links"], c2c["links"]), f"probe: {c2c['source']}")
    power = fp.get("power") or {}
    found = sorted({s["what"] for s in power.get("hwmon", []) if s.get("what")})
    if found:
        out["power_sensors"] = (found, "probe: hwmon power*_oem_info")
    if any(p.get("watts") is not None for p in power.get("gpus", [])):
        out["gpu_power"] = (True, "probe: NVML nvmlDeviceGetPowerUsage")
    missing = [s for s in expected_sensors if s not in found]
    if expected_sensors and missing:
        out["power_sensors_missing"] = (missing, "hwmon has no sensor labelled so")
    return out


def compute_peaks(fp) -> dict:
    """Dense peak TFLOP/s by precision from the packaged description matching the GPU ({} if none)."""
    g = _selected(fp)
    name = g["name"] if g else ""
    for stem, d in packaged().items():
        if d.get("match") and d["match"] in name and d.get("compute"):
            return {k: (float(v), f"{stem}.yaml") for k, v in d["compute"].items()}
    return {}


def read_machine(path) -> tuple:
    """A machine description file (umscope.inputs.read_yaml): (document, datapaths, sources), each datapath a
    finite number of GB/s of at least 0 or null, sources a mapping; one-line UsageError otherwise."""
    from umscope import inputs
    what = f"machine description {path}"
    d = inputs.need_mapping(inputs.read_yaml(path, "--machine"), what, ("datapaths",))
    user = inputs.need_mapping(d["datapaths"], f"{what}: datapaths")
    for k, v in user.items():
        if not isinstance(k, str):
            raise UsageError(f"{what}: datapath names are text, got {k!r}"[:200])
        if v is not None:
            inputs.need_number(v, f"{what}: datapath {k}")
    srcs = d.get("sources") or {}
    inputs.need_mapping(srcs, f"{what}: sources")
    return d, user, srcs


def describe(fp, machine_file=None) -> dict:
    """The machine description in force: {'name', 'datapaths': {path: (GB/s, source)}, 'host': host_facts()}:
    the packaged description that matches the GPU, the probe's figures over it, the user's file over both."""
    desc = {"name": "probed", "datapaths": {}}
    g = _selected(fp)
    name = g["name"] if g else ""
    expected = ()
    for stem, d in packaged().items():
        if d.get("match") and d["match"] in name:
            desc["name"] = d["name"]
            expected = d.get("power_sensors") or ()
            srcs = d.get("sources") or {}
            for k, v in d["datapaths"].items():
                desc["datapaths"][k] = (v, f"{srcs.get(k) or 'datasheet: ' + str(d.get('source'))} ({stem}.yaml)")
            break
    desc["datapaths"].update(from_probe(fp))
    desc["host"] = host_facts(fp, expected)
    if machine_file:
        path = Path(machine_file)
        if not path.exists():
            pkg = MACHINES / f"{machine_file}.yaml"
            if not pkg.exists():
                raise UsageError(f"no machine description {machine_file!r} (a YAML file, or one of "
                                 f"{', '.join(packaged())})")
            path = pkg
        d, user, srcs = read_machine(path)
        desc["name"] = str(d.get("name") or path.stem)
        for k, v in user.items():
            desc["datapaths"][k] = (float(v), str(srcs.get(k) or f"file: {path}")) if v is not None else None
    desc["datapaths"] = {k: v for k, v in desc["datapaths"].items() if v}
    if "peer_link" in desc["datapaths"]:  # per direction: into and out of the GPU under test
        for k in ("peer_in", "peer_out"):
            desc["datapaths"].setdefault(k, desc["datapaths"]["peer_link"])
    return desc


def record_location(rec, fp, prefix="") -> str:
    """Where a record's data sits: the `location` (or `dst_location`) the runner wrote into it from the kind's
    own declaration (native/memory/kinds.cpp); records stored before runners wrote it fall back to location()."""
    return rec.get(prefix + "location") or location(rec.get(prefix + "kind") or "", rec.get(prefix + "policy"), fp)


def location(kind: str, policy: str, fp) -> str:
    """Where the data of a kind sits in steady state ('gpu', 'peer' or 'host'), for a kind without a record of
    the runner (stores written before records carried `location`, PyTorch's allocator in the llm app)."""
    if kind == "device":
        return "gpu"
    if kind.startswith("peer:"):
        return "peer"
    if kind == "managed":
        return "host" if "preferred:cpu" in (policy or "") else "gpu"
    g = _selected(fp)
    if kind.startswith("numa:") and g and str(g.get("numa_id")) == kind.split(":")[1]:
        return "gpu"
    return "host"


def uses(rec, fp) -> dict:
    """Resource -> bytes a record's reported bytes needed (per `bytes`)."""
    n = 1.0
    u = {}

    def add(k, v):
        u[k] = u.get(k, 0) + v

    bench, op = rec.get("benchmark"), rec.get("op")
    if bench == "contention":
        # Each side alone is a stream of its processor; both at once share host memory.
        if op == "sum":
            return {"host_memory": n}
        proc = rec.get("processor") or ""
        bench = "cpu-stream" if proc == "cpu" else "gpu-stream"
    if bench == "migration":  # a GPU stream, iterated
        bench = "gpu-stream"
    if bench == "qv" and op == "gate":  # each gate reads and writes the state once: a copy in place
        if (rec.get("processor") or "") == "cpu":
            return {"host_memory": 2.0}
        bench, op = "gpu-stream", "copy"
    loc = record_location(rec, fp)
    ops = _ops()
    if bench == "gpu-stream" and op in ops:
        r, w = ops[op]
        if loc == "gpu":
            add("gpu_memory", (r + w) * n)
        elif loc == "peer":  # the other GPU's memory over the peer link, each direction its own
            add("gpu_memory", (r + w) * n)
            add("peer_in", r * n)
            add("peer_out", w * n)
        else:
            add("h2d", r * n)
            add("d2h", w * n)
            add("host_memory", (r + w) * n)
        return u
    if bench == "cpu-stream" and op in ops:
        r, w = ops[op]
        if (rec.get("kind") or "") == "managed" or loc == "host":
            add("host_memory", (r + w) * n)
        else:  # CPU reaching GPU memory (Grace Hopper): over the link
            add("d2h", r * n)
            add("h2d", w * n)
            add("gpu_memory", (r + w) * n)
        return u
    if bench == "copy":
        dst_loc = record_location(rec, fp, "dst_")
        pairs = [(loc, dst_loc)]
        if rec.get("route") == "both":
            pairs = [(loc, dst_loc), (dst_loc, loc)]
        for s, d in pairs:
            add("gpu_memory" if s in ("gpu", "peer") else "host_memory", n)
            add("gpu_memory" if d in ("gpu", "peer") else "host_memory", n)
            if s == d == "peer":
                # Both buffers on the other GPU: a copy engine copies there (HBM only, measured at 2 TB/s
                # on an H200 pair); SMs of the GPU under test pull and push across the link.
                if op == "sm-copy":
                    add("peer_in", n)
                    add("peer_out", n)
            elif "peer" in (s, d) and "host" in (s, d):  # host and the other GPU: that GPU's host link
                add("h2d" if s == "host" else "d2h", n)
            elif "peer" in (s, d):
                add("peer_in" if s == "peer" else "peer_out", n)
            elif s == "host" and d == "gpu":
                add("h2d", n)
            elif s == "gpu" and d == "host":
                add("d2h", n)
            elif s == "host" and d == "host":  # through the GPU: the link both ways
                add("h2d", n)
                add("d2h", n)
        return u
    return {}


def source(desc, datapath) -> str:
    """Where the peak of a datapath came from ('probe: ...', 'datasheet: ...', 'paper: ...', 'file: ...')."""
    peak = desc["datapaths"].get(datapath)
    return peak[1] if peak else "unknown"


def bound(rec, fp, desc):
    """(bound in GB/s, limiting datapath) or (None, why)."""
    if rec.get("unit") != "GB/s":
        return None, "not a bandwidth"
    u = uses(rec, fp)
    if not u:
        return None, "no datapath model for this benchmark"
    n_reported = 2.0 if rec.get("route") == "both" else 1.0
    ops = _ops()
    if rec.get("benchmark") in ("gpu-stream", "cpu-stream", "contention", "migration") and rec.get("op") in ops:
        r, w = ops[rec["op"]]
        n_reported = float(r + w)
    if rec.get("benchmark") == "qv":
        n_reported = 2.0
    worst, limiting = 0.0, None
    missing = []
    for res, b in u.items():
        peak = desc["datapaths"].get(res)
        if peak is None:
            missing.append(res)
            continue
        t = b / peak[0]
        if t > worst:
            worst, limiting = t, res
    if missing and (limiting is None or any(m in ("gpu_memory", "h2d", "d2h") for m in missing)):
        return None, "peak unknown for " + ", ".join(missing)
    return round(n_reported / worst, 2), limiting


def annotate(records, fp, desc):
    """Adds bound, efficiency (median / bound), datapath and the bound's source to bandwidth records."""
    for rec in records:
        # A record of another GPU than the run's (--devices): its own GPU's locality and peers.
        d = rec.get("device")
        rfp = fp if d is None or d == fp.get("device", 0) else dict(fp, device=d)
        b, why = bound(rec, rfp, desc)
        if b:
            rec["bound"] = b
            rec["datapath"] = why
            rec["bound_source"] = source(desc, why)
            if rec.get("median"):
                rec["efficiency"] = round(rec["median"] / b, 4)
        elif rec.get("unit") == "GB/s":
            rec["bound_note"] = why
    return records
