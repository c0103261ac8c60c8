"""The unified-memory policy simulator, driven from Python.

The replay itself is native (`umsim`, native/sim/umsim.cpp, built and
installed with umbench; it needs no GPU). This module builds its argument
lists, writes trace files for it, reads the driver's parameters (the
`nvidia_uvm` module parameters `umscope info` shows) and turns the counts
it returns into modelled times with a machine's figures. Everything it
produces is a model output: records carry status `modelled`, the model
version and their inputs."""

import json
import math
import struct
import subprocess
from array import array

from umscope import native
from umscope.errors import UsageError
from umscope.model import apps as model_apps

# umsim-6: the density prefetcher computes every faulted granule's region of a batch and VA block on one occupancy
# (the driver's compute_prefetch_mask), where umsim-5 let one region enlarge the next (session 12). Figures
# validated with umsim-5 (advise's, docs/advise-validation-h100.md) say so beside umsim-6's output.
# umsim-7: the timed replay's mechanisms, chosen by the rule on the calibration programs, take the SMs whose blocks
# share pages in one order (calibration.FEATURES' block-groups, session 22). Only the validation's timed replay
# (validation.compare) passes mechanisms; the untimed replay advise and model price with is umsim-6's, so figures
# validated with umsim-6 hold for it (UNTIMED).
# umsim-8: two more of the timed replay's mechanisms, chosen by the rule's search over every combination of
# calibration.FEATURES (session 24): a uTLB the replay released resumes within its burst (resume) and the read
# kernels' instances of one instant enter round by round (spread-read). Both act on the timed replay alone
# (umsim refuses --resume-us without --timed), so the untimed replay stays umsim-6's.
VERSION = "umsim-8"
UNTIMED = ("umsim-8", "umsim-7", "umsim-6")  # the versions whose untimed replay is this one's
POLICIES = ("uvm", "svm", "ats", "zerocopy")
EVICTIONS = ("lrf", "lru", "clock")
BARRIER = 0xFFFFFFFF
WRITE = 1 << 31
CPU = 1 << 30


def __getattr__(name):
    # SIM_APPS: the applications umsim has a generator for, from the applications' registered facts
    # (model/apps.py), read when first used, not at import.
    if name == "SIM_APPS":
        return model_apps.simulated()
    raise AttributeError(name)

# nvidia_uvm module parameter -> (umsim option, converter). Where the driver does not expose one (or
# the module is not loaded) umsim's default is used: the open driver's default value, named in --help.
_DRIVER = {
    "uvm_perf_fault_batch_count": ("batch", int),
    "uvm_perf_prefetch_enable": ("prefetch", lambda v: "on" if int(v) else "off"),
    "uvm_perf_prefetch_threshold": ("prefetch_threshold", int),
    "uvm_perf_thrashing_threshold": ("thrash_threshold", int),
    "uvm_perf_access_counter_threshold": ("counter_threshold", int),
    # the timed replay's flush rule and service loop (uvm_gpu_replayable_faults.c)
    "uvm_perf_fault_replay_update_put_ratio": ("update_put_ratio", int),
    "uvm_perf_fault_max_batches_per_service": ("max_batches_per_service", int),
}


def umsim_path() -> str:
    return native.find_binary("umsim", "UMSCOPE_UMSIM", "the simulator umsim is missing: install the package with "
                              "pip (it builds umsim) or set UMSCOPE_UMSIM")


def driver_params(uvm: dict) -> dict:
    """umsim parameters from `umscope info`'s uvm section ({'readable', 'params'}), with their source."""
    out = {}
    if not uvm or not uvm.get("readable"):
        return out
    for name, (opt, conv) in _DRIVER.items():
        v = (uvm.get("params") or {}).get(name)
        if v in (None, ""):
            continue
        try:
            out[opt] = conv(v)
        except ValueError:
            continue
        if opt == "thrash_threshold" and str((uvm["params"] or {}).get("uvm_perf_thrashing_enable", "1")) == "0":
            out[opt] = 0
    return out


def write_trace(path, allocs, events, page_bytes=4096):
    """A trace file for umsim: allocs = [(first_page, n_pages)], sorted and disjoint; events = ints
    (page | WRITE | CPU, or BARRIER)."""
    ev = array("I", events)
    with open(path, "wb") as f:
        f.write(b"UMSTRACE")
        f.write(struct.pack("<II", int(page_bytes), len(allocs)))
        for first, n in allocs:
            f.write(struct.pack("<II", int(first), int(n)))
        f.write(struct.pack("<Q", len(ev)))
        if ev.itemsize != 4:
            raise RuntimeError("array('I') is not 32-bit on this platform")
        ev.tofile(f)


def args_for(params: dict) -> list:
    """umsim's argument list from a parameter dict (keys as the options without '--', '_' for '-')."""
    argv = []
    for k, v in params.items():
        if v is None or v is False:
            continue
        opt = "--" + k.replace("_", "-")
        if v is True:
            argv.append(opt)
        else:
            argv += [opt, str(v)]
    return argv


PROGRESS = "umsim: progress: "


def run(params: dict, progress=None, every=10.0) -> dict:
    """Runs umsim once: the counts it reports (one JSON object). Bad parameters (and a stream whose page state
    would not fit in this machine's memory) raise UsageError. progress: called with umsim's progress line
    (events replayed so far) every `every` seconds of a long replay."""
    argv = [umsim_path(), *args_for(params)] + (["--progress", str(every)] if progress else [])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        err = []
        for line in proc.stderr:  # umsim writes its one line of counts at the end: stdout cannot fill first
            if line.startswith(PROGRESS) and progress:
                progress(line[len(PROGRESS):].strip())
            else:
                err.append(line)
        out = proc.stdout.read()
        rc = proc.wait()
    if rc != 0:
        text = "".join(err).strip()
        raise UsageError(text.splitlines()[-1] if text else f"umsim failed (exit {rc})")
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------ modelled time
def modelled_time(stats: dict, fig: dict) -> dict:
    """Seconds the counts cost on a machine, by term. fig: hbm_gbps (GPU memory), remote_gbps (GPU reading
    host memory over the link), migrate_gbps (demand migration), evict_gbps (eviction, default migrate),
    fault_batch_us (per batch), fault_us (per distinct fault), migration_us (per migration operation)."""
    pb = stats["page_bytes"]
    gb = 1e9
    terms = {
        "local": stats["hits"] * pb / (fig["hbm_gbps"] * gb),
        "remote": (stats["remote_gpu_pages"]) * pb / (fig["remote_gbps"] * gb),
        "migrate": (stats["h2d_fault_pages"] + stats["h2d_prefetch_pages"] + stats["h2d_counter_pages"]) * pb
                   / (fig["migrate_gbps"] * gb),
        "evict": (stats["d2h_evict_pages"] + stats["d2h_cpu_fault_pages"]) * pb
                 / (fig.get("evict_gbps", fig["migrate_gbps"]) * gb),
        "faults": stats["batches"] * fig.get("fault_batch_us", 0) * 1e-6 + stats["faults"] * fig.get("fault_us", 0)
                  * 1e-6 + stats["migrations"] * fig.get("migration_us", 0) * 1e-6,
    }
    terms["total"] = sum(terms.values())
    return terms


def record(stats: dict, fig: dict, fig_source: str, extra=None) -> dict:
    """A modelled record: the counts, the modelled time and every input, labelled."""
    t = modelled_time(stats, fig)
    rec = {"type": "record", "family": "simulate", "status": "modelled", "model_version": VERSION,
           "verified": "modelled: event-level replay; counts exact for the model, times from the figures below",
           "inputs": {"machine_figures": fig, "figures_source": fig_source,
                      "parameters": {k: stats[k] for k in ("policy", "eviction", "page_bytes", "unit_pages",
                                                           "granule_pages", "prefetch", "prefetch_threshold",
                                                           "batch_size", "thrash_threshold", "counter_threshold",
                                                           "capacity_pages")}},
           "counts": stats, "modelled_seconds": t}
    from umscope.model import calibrated
    rec["validated_error"] = calibrated.validated("umsim", version=VERSION)
    rec.update(extra or {})
    return rec


# ------------------------------------------------------------------ launch concurrency
def resident(grid, block, regs=0, shared=0, props=None) -> dict:
    """The blocks and warps of a launch resident on the GPU at once: blocks per SM bounded by the SM's
    threads, blocks, registers (allocated per warp in units of 256) and shared memory (props: the device's
    sms, max_threads_per_sm, max_blocks_per_sm, regs_per_sm, shared_per_sm, as `umscope info` reads them),
    times the SMs, at most the grid's blocks. grid, block: [x, y, z] or a number."""
    prod = lambda v: v if isinstance(v, int) else math.prod(int(x) for x in v)  # noqa: E731
    nb, nt = prod(grid), prod(block)
    p = props or {}
    if nb <= 0 or nt <= 0 or not p.get("sms") or not p.get("max_threads_per_sm"):
        raise ValueError("resident() needs a grid, a block and the device's sms and max_threads_per_sm")
    warps = (nt + 31) // 32
    per_sm = [("threads", p["max_threads_per_sm"] // (warps * 32))]
    if p.get("max_blocks_per_sm"):
        per_sm.append(("blocks", p["max_blocks_per_sm"]))
    if regs and p.get("regs_per_sm"):
        per_sm.append(("registers", p["regs_per_sm"] // (warps * ((int(regs) * 32 + 255) // 256 * 256))))
    if shared and p.get("shared_per_sm"):
        per_sm.append(("shared memory", p["shared_per_sm"] // int(shared)))
    limit, bps = min(per_sm, key=lambda x: x[1])
    bps = max(0, bps)
    blocks = min(nb, bps * p["sms"])
    return {"blocks_per_sm": bps, "blocks": blocks, "warps": blocks * warps, "threads": blocks * nt,
            "limited_by": limit if nb > bps * p["sms"] else "grid"}


# ------------------------------------------------------------------ the launch in time (umsim --timed)
def trace_timing(lines, page_bytes=4096):
    """What a libumtrace trace measures of its first kernel's fault servicing, for umsim --timed: the UVM
    driver's migrations of that kernel (CUPTI's host-to-device records, which the driver writes per
    contiguous piece of a VA block it services) fall into groups, one per serviced batch, separated by the
    driver's per-batch work (fault fetch, sort, mapping, replay): `gap_us` is the median gap between groups
    (their per-batch fixed cost), `page_us` the records' copy time per 4 KiB page (their summed durations
    over the pages they carry), `first_kernel_ms` the kernel's measured time (`kernels_ms`: with its later
    launches of the same grid), `later_launch_ns` the fastest
    later launch of the same kernel (resident pages: the SMs' rate without faults), None if there is none.
    CUPTI's records are lossy (the driver drops events when its tools queue is full): the groups are those
    that arrived, a sample of the kernel's batches. None when the trace has no kernel or no migration."""
    ks = [e for e in lines if e.get("k") == "kernel"]
    if not ks:
        return None
    k0 = ks[0]
    h = sorted((e for e in lines if e.get("k") == "um" and e.get("c") == 1 and k0["s"] <= e.get("s", 0) <= k0["e"]
                and e.get("v")), key=lambda e: e["s"])
    if len(h) < 3:
        return None
    groups = [[h[0]]]
    for a, b in zip(h, h[1:]):
        if b["s"] - a["e"] > 15000:  # ns: a record ends and the next begins within the same service
            groups.append([])
        groups[-1].append(b)
    gaps = sorted(b[0]["s"] - a[-1]["e"] for a, b in zip(groups, groups[1:]))
    if not gaps:
        return None
    pages = sum(e["v"] for e in h) / page_bytes
    out = {"gap_us": gaps[len(gaps) // 2] / 1e3, "page_us": sum(e["e"] - e["s"] for e in h) / 1e3 / pages,
           "groups": len(groups), "first_kernel_ms": (k0["e"] - k0["s"]) / 1e6}
    same = [e["e"] - e["s"] for e in ks[1:] if e.get("n") == k0.get("n") and e.get("g") == k0.get("g")]
    out["kernels_ms"] = out["first_kernel_ms"] + sum(same) / 1e6
    out["later_launch_ns"] = min(same) if same else None
    return out


def timed_params(timing, kernel_pages, sms, hbm_gbps, page_bytes=4096, fetch_us=None, utlb_faults=2):
    """umsim --timed options from trace_timing()'s measurements of a launch on `sms` SMs over
    `kernel_pages` pages; returns (options, where the resident rate came from). fetch_us: the driver's delay from a fault to its batch's first migration (measured
    in the traces with CUPTI fault records: the record's start to the next migration), taken out of the
    per-batch gap; the rest of the gap is the batch's fixed service cost."""
    t = timing
    later_ns = t.get("later_launch_ns")
    # A later launch of the same kernel that ran near HBM speed was resident; one that faulted was not.
    if later_ns and kernel_pages * page_bytes / later_ns >= 0.05 * hbm_gbps:
        rate_ns, src = later_ns * sms / kernel_pages, "a later launch of the kernel"
    else:
        rate_ns, src = page_bytes * sms / hbm_gbps, f"HBM read bandwidth {hbm_gbps:g} GB/s"
    fetch = min(fetch_us if fetch_us is not None else 0.0, t["gap_us"])
    return {"timed": True, "utlb_faults": utlb_faults, "resident_ns": round(rate_ns, 3),
            "fetch_us": round(fetch, 3), "batch_us": round(t["gap_us"] - fetch, 3),
            "page_us": round(t["page_us"], 5)}, src


def fault_to_migration_us(lines):
    """Median delay from a GPU fault group's first fault (CUPTI fault record start) to the next migration of
    the kernel (CUPTI host-to-device record start): the driver's wake-up and fetch before it services a
    batch. None where the trace has no fault records (CUPTI loses them)."""
    import bisect
    f = sorted((e for e in lines if e.get("k") == "um" and e.get("c") == 4), key=lambda e: e["s"])
    h = sorted(e["s"] for e in lines if e.get("k") == "um" and e.get("c") == 1)
    d = []
    for x in f[1:]:
        i = bisect.bisect_left(h, x["s"])
        if i < len(h):
            d.append(h[i] - x["s"])
    d.sort()
    return d[len(d) // 2] / 1e3 if len(d) >= 10 else None
