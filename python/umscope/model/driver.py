"""The simulator's driver: umsim's option limits, one replay per policy side by side (simulate_all) and
the advice built on those replays (advise). The command lines of `umscope simulate`, `model` and `advise`
are model/commands.py; the umsim process itself is model/simulate.py."""

import os

from umscope.errors import UsageError
from umscope.model import calibrated, dos
from umscope.model import simulate as sim
from umscope.sizes import format_size

# umsim's largest VA block / SVM range / counter region, in pages: its page-number space (30 bits;
# native/sim/umsim.cpp checks it).
UMSIM_MAX_UNIT_PAGES = 1 << 30
# The simulator's options with their limits, declared once: umsim keeps them in 32-bit counters.
U32 = (1 << 32) - 1
SIM_INT_OPTIONS = {"prefetch-threshold": (0, 100, "percentage of a region's pages that triggers a prefetch"),
                   "batch": (1, U32, "fault batch size"),
                   "thrash-threshold": (0, U32, "faults on a block that count as thrashing; 0 turns detection off"),
                   "counter-threshold": (1, U32, "access-counter notifications that trigger a migration")}
MAX_SIM_DOS = 1e6        # percent: a GPU a ten-thousandth of the footprint
MAX_SIM_FOOTPRINT = 1 << 50  # bytes (umsim's page numbers are 30 bits: it says what fits at each --page)


def driver_here() -> dict:
    """The UVM driver's parameters of this machine (batch size, thresholds), {} where they cannot be read."""
    try:
        from umscope import probe
        return sim.driver_params(probe.uvm_params())
    except Exception:  # noqa: BLE001 - the driver's parameters are optional
        return {}


def trace_completeness(tr: dict) -> str:
    """'' where the trace's CUPTI records hold every byte the driver migrated (or the trace has no driver
    count); otherwise what share they hold: the replayed stream is then a lower bound."""
    drv, rec = tr.get("driver_htod_bytes"), tr.get("recorded_htod_bytes", 0)
    if not drv or rec >= 0.99 * drv:
        return ""
    return (f"the trace's CUPTI records hold {format_size(rec) if rec else '0 B'} of the {format_size(drv)} the "
            f"driver migrated to the GPU ({rec / drv:.0%}): CUPTI dropped records, so the replayed stream holds "
            "only the recorded pages and its counts and times are lower bounds")


def gpu_work_note(tr: dict) -> str:
    """'' where the trace shows the GPU's work completing; otherwise what says it did not: kernels CUPTI recorded
    without a start or an end (stopped by an error, or still running at exit), and GPU faults outside every
    allocation the trace records (an access out of bounds; on HMM/ATS systems also system-allocated memory).
    UVMBench's srad at 13248 x 13248 (an H200, session 16): its first kernel reads `cols` floats (52 KiB) before its
    first managed array, all 4 kernels untimed, the program exits 0 unchecked, and advise had priced its stream as
    real work."""
    n, out, ex = tr.get("kernels_untimed", 0), tr.get("faults_outside", 0), tr.get("fault_outside_example")
    if not n and not out:
        return ""
    parts = []
    if n:
        parts.append(f"{n} of {tr.get('kernels', n)} kernels have no start or end time in CUPTI's records (a kernel "
                     "stopped by an error, or still running at exit)")
    if out:
        where = ""
        if ex and ex[1] is not None:
            where = (f" (0x{ex[0]:x}, {format_size(abs(ex[2]))} {'before' if ex[2] < 0 else 'past the end of'} the "
                     f"allocation at 0x{ex[1]:x})")
        parts.append(f"the GPU faulted {out} time(s) outside every allocation the trace records{where}: an access "
                     "out of bounds, which stops the kernel with an illegal address (on HMM/ATS systems, also "
                     "system-allocated memory)")
    verdict = (": the GPU work most likely did not run as launched (a program that checks no CUDA error still exits "
               "0), and the stream replayed is not the program's work" if n else "")
    return "; ".join(parts) + verdict


def svm_unit(capacity: int, page: int = 4096) -> int:
    """The SVM model's range in bytes: 1/64 of GPU memory (Cooper et al.: a 1 GiB range on a 64 GiB GPU), in
    whole pages."""
    return max(page, capacity // 64 // page * page)


def check_extra(extra: dict):
    """The simulator options umsim would refuse, refused here first (one line, exit 2, nothing run)."""
    page = extra.get("page", 4096)
    if page < 4096 or page % 4096:
        raise UsageError(f"--page must be a multiple of 4 KiB (got {page} bytes)")
    unit = extra.get("unit")
    if unit is None and page > 2 << 20:
        raise UsageError(f"--page {format_size(page)} exceeds the 2 MiB VA block: give --unit too")
    if unit is not None and not page <= unit <= UMSIM_MAX_UNIT_PAGES * page:
        raise UsageError(f"--unit must be 1 to {UMSIM_MAX_UNIT_PAGES} pages of {format_size(page)} (umsim's page-number "
                         f"space; at most {format_size(UMSIM_MAX_UNIT_PAGES * page)})")
    for k in ("batch", "counter_threshold"):
        if extra.get(k) is not None and extra[k] < 1:
            raise UsageError(f"--{k.replace('_', '-')} must be at least 1")
    if extra.get("thrash_threshold") is not None and extra["thrash_threshold"] < 0:
        raise UsageError("--thrash-threshold must be 0 (off) or more")
    if extra.get("prefetch_threshold") is not None and not 0 <= extra["prefetch_threshold"] <= 100:
        raise UsageError("--prefetch-threshold is a percentage (0-100)")


def simulate_all(stream, capacity, policies, fig, extra, drv, progress=None):
    """One umsim per policy, run side by side (one core each, at most this machine's cores) where their page
    states are small."""
    from concurrent.futures import ThreadPoolExecutor
    params = []
    for pol in policies:
        p = dict(stream, capacity=capacity, policy=pol)
        if pol == "uvm":
            p.update(drv)
        if pol == "svm" and "unit" not in extra:
            p["unit"] = svm_unit(capacity, extra.get("page", 4096))
        p.update(extra)
        params.append(p)
    # Side by side only while their page states are small (about 10 bytes a page each, docs/simulator.md): each
    # umsim checks what it needs against the memory free when it starts, which the others beside it would take.
    pages = stream.get("footprint", 0) // extra.get("page", 4096)
    workers = max(1, min(len(params), os.cpu_count() or 1)) if pages * 10 <= 1 << 30 else 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        counts = list(pool.map(lambda p: sim.run(p, progress=progress), params))
    return [sim.record(s, fig, extra.get("_src", ""), {"params": {k: str(v) for k, v in p.items()}})
            for s, p in zip(counts, params)]


# The machine description the calibrated model's validation ran on (docs/model-validation.md).
VALIDATED_MACHINE = "h100-sxm-pcie5"


def validated_for(machine: str, app: str, mode: str, packaged: bool) -> dict:
    """The calibrated model's validated error for this case (with the packaged figures where those are used);
    on a machine description other than the one it was validated on, marked as not validated there."""
    v = calibrated.validated_model(app, mode, packaged=packaged)
    if machine != VALIDATED_MACHINE and "median" in v:
        v["note"] = (f"validated on {v.get('machine')} only, not on {machine}: its errors are shown for reference"
                     + (f"; {v['note']}" if v.get("note") else ""))
        v["this_case_on_validated_machine"] = v.pop("this_case", None)
        v["this_case"] = None
    return v


# ------------------------------------------------------------------ advise
HINTS = {
    "managed-prefetch": "prefetch the inputs to the GPU before the first kernel (cudaMemPrefetchAsync), and the "
                        "results back before the CPU reads them",
    "managed": "plain managed memory: demand migration is cheapest here",
    "zerocopy": "keep the data on the CPU and let the GPU read it over the link (cudaMemAdviseSetPreferredLocation "
                "CPU + SetAccessedBy GPU, or pinned memory)",
    "system": "system-allocated memory (malloc) through ATS: remote access with access-counter migration",
    "svm-ranges": "(AMD SVM range migration: shown for comparison)",
}
EXPLICIT_ESTIMATE = ("not simulated: cudaMalloc plus cudaMemcpy; the pages umsim migrated under managed memory "
                     "copied in at h2d_gbps, the pages the CPU faulted back copied out at d2h_gbps, every GPU access "
                     "at hbm_gbps; pages the GPU touches first (outputs) need no copy in")
# Where advise's own validation (the advised mode against the mode measured fastest, bench/advise_validate.py on
# the H100) is written; until model/validated.json has an "advise" entry, advise says plainly that there is none.
ADVISE_DOC = "docs/advise-validation-h100.md"
NO_ADVISE_VALIDATION = (f"no validated error: advise has not been checked against measured runs; {ADVISE_DOC}")
PREFETCH_ESTIMATE = ("not simulated: the pages umsim migrated or populated under managed memory moved once at "
                     "migrate_gbps, then every access at hbm_gbps")
TIMES_NOTE = ("modelled times: umsim's counts priced with the machine figures (model/simulate.py modelled_time); "
              "not validated against measured times, so the gain is an estimate without a validated error")
TIMES_VALIDATED = ("modelled times: umsim's counts priced with the machine figures (model/simulate.py modelled_time); "
                   "the gain's error against measured runs is advise's validated error, below")


def page_note(page_bytes: int) -> str:
    """What a replay at a page larger than the driver's 4 KiB counts ('' at 4 KiB)."""
    if page_bytes == 4096:
        return ""
    return (f"replayed in pages of {format_size(page_bytes)}, not the driver's 4 KiB: faults, batches and the accesses "
            f"the ats counters count are per {format_size(page_bytes)} page (up to {page_bytes // 4096}x fewer), so "
            "fault costs are lower bounds and counter migration comes later; bytes moved by uvm and svm, which "
            "migrate whole granules and blocks, keep their scale (docs/simulator.md)")


UNSEEN_NOTE = ("the trace holds no access to {size} that the driver's density prefetcher moved to the GPU (the "
               "accesses found it resident); each mode is priced one GPU read of it: over the link for zerocopy and "
               "system memory, from GPU memory for the others (their moves of it are in the replay's counts)")


MEASURED_BASE = ("measured: the traced run's own GPU stream under managed memory (trace.gpu_stream: first kernel, copy "
                 "or migration to the GPU to the end of the last kernel or copy, under the tracer), not the replay's "
                 "modelled time: the gain is the other modes' modelled times against what this program measured")
REMOTE_BOUND = ("a lower bound, not recommended from a trace: the trace holds no count of the GPU's accesses to "
                "resident data nor of their size, which remote access pays over the link for each (UVMBench's nw and "
                "gaussian on an H200, session 17: zerocopy modelled 12.8x and 28x faster than managed memory, measured "
                "more than 3x slower)")
DRIVER_BYTES = ("the bytes to move in are the UVM driver's own count of what it migrated to the GPU in the traced run "
                "({size}), more than the replay's pages ({replayed}): CUPTI's records hold only part of them")


def advise(stream, foot, capacity, machine, iterations_note="", figures=None, extra=None, progress=None,
           own_figures=False, unseen_bytes=0, traced=None):
    """unseen_bytes: GPU data a traced stream never shows accessed (trace.from_umtrace's prefetched_unseen_bytes):
    read once by every mode, so that zerocopy is not priced on the faulted pages alone while managed memory,
    prefetch and explicit copies move the whole of it.
    traced: a traced program's measurements (trace.from_umtrace's 'stream', 'driver_htod_bytes' and
    'recorded_htod_bytes'). Its GPU stream is plain managed memory's time (measured beats modelled: on UVMBench's nw
    and pathfinder, an H200 in session 17, the replay priced managed memory at 210 and 10 ms where the trace
    measured 626 and 82 ms); its idle time (the host's pace between launches) and its resident kernels' time
    (kernels during which nothing faulted or migrated in: their own work; resident_time_ns) are added to every
    modelled mode; the driver's migrated bytes, where more than the replay's, are what prefetch and explicit copies
    move in and remote access reads over the link. From any trace (traced given, even without a measured stream),
    remote access is a lower bound, never recommended (REMOTE_BOUND)."""
    from_trace, traced = traced is not None, traced or {}
    measured = traced.get("stream")
    drv_bytes = traced.get("driver_htod_bytes") or 0
    # The traced run's idle time and its resident kernels' own work: in every mode, not in the replay's counts.
    # Where CUPTI dropped records, a kernel that faulted can look resident (pathfinder on an H200, session 17: 4 of
    # its 50 kernels, 8 ms, with 91% of the migrated bytes recorded): the bytes the records lost are taken out at
    # the rate the faulting kernels moved the recorded ones.
    resident_ns = resident_time_ns(measured, drv_bytes, traced.get("recorded_htod_bytes")) if measured else 0
    kept = (measured["idle_ns"] + resident_ns) / 1e9 if measured else 0.0  # seconds every modelled mode keeps
    fig_doc = dos.figures(machine)
    fig, src = figures or dos.machine_figures(machine)
    drv = driver_here() if machine == "h100-sxm-pcie5" else {}
    pols = ["uvm", "zerocopy"] + (["ats"] if fig_doc.get("ats") else [])
    recs = {r["counts"]["policy"]: r for r in simulate_all(stream, capacity, pols, fig, extra or {}, drv, progress)}
    t = {"managed": recs["uvm"]["modelled_seconds"]["total"], "zerocopy": recs["zerocopy"]["modelled_seconds"]["total"]}
    if "ats" in recs:
        t["system"] = recs["ats"]["modelled_seconds"]["total"]
    u = recs["uvm"]["counts"]
    pb = u["page_bytes"]
    unseen_pages = -(-unseen_bytes // pb)
    for p in t:
        t[p] += unseen_pages * pb / (fig["remote_gbps" if p in ("zerocopy", "system") else "hbm_gbps"] * 1e9) + kept
    fits = u["footprint_pages"] <= u["capacity_pages"]
    moved_in = None
    if fits:
        # Prefetch: every page the GPU needs moves once at bulk rate, no faults; then every access is local.
        moved = (u["h2d_fault_pages"] + u["h2d_prefetch_pages"] + u["populate_gpu_pages"]) * pb
        moved_in = max(moved, drv_bytes)
        t["managed-prefetch"] = (moved_in / (fig["migrate_gbps"] * 1e9)
                                 + (u["gpu_events"] + unseen_pages) * pb / (fig["hbm_gbps"] * 1e9) + kept)
    short = {}  # remote access reads at least what the driver moved in the traced run, as prefetch moves it
    for p, pol in (("zerocopy", "zerocopy"), ("system", "ats")):
        if p not in t:
            continue
        read = (recs[pol]["counts"]["remote_gpu_pages"] + unseen_pages) * pb
        if drv_bytes > read:
            short[p] = drv_bytes - read
            t[p] += short[p] / (fig["remote_gbps"] * 1e9)
    modelled = dict(t)
    if measured:
        t["managed"] = measured["span_ns"] / 1e9
    # From a trace, remote access is a lower bound (REMOTE_BOUND) and not recommended.
    best = min((p for p in t if not (from_trace and p in ("zerocopy", "system"))), key=t.get)
    base = t["managed"]
    explicit = explicit_copies(u, fig, fits, best, t[best], unseen_pages, drv_bytes, kept)
    hints = [HINTS[best]]
    if moved_in and drv_bytes > moved:
        hints.append(DRIVER_BYTES.format(size=format_size(drv_bytes), replayed=format_size(moved)))
    if unseen_pages:
        hints.append(UNSEEN_NOTE.format(size=format_size(unseen_pages * pb)))
    if not fits:
        hints.append(f"the footprint exceeds GPU memory (DOS {100 * u['footprint_pages'] / u['capacity_pages']:.0f}): "
                     f"managed memory evicts {u['evictions']} blocks and re-migrates; "
                     + ("thrashing detection mapped %d blocks remotely" % u["thrash_units"] if u["thrash_units"] else
                        "no thrashing detected"))
    evidence = {p: {"modelled_ms": round(v * 1e3, 3)} for p, v in modelled.items()}
    if measured:
        evidence["managed"].update(measured_ms=round(measured["span_ns"] / 1e6, 3), how=MEASURED_BASE)
        for p in evidence:
            if p != "managed":
                evidence[p].update(idle_ms=round(measured["idle_ns"] / 1e6, 3),
                                   resident_kernels_ms=round(resident_ns / 1e6, 3))
    for p in ("zerocopy", "system"):
        if from_trace and p in evidence:
            evidence[p].update(lower_bound=True, how=REMOTE_BOUND)
    checked = advise_validated(stream.get("app"), foot, machine, own_figures)
    for p, r in recs.items():
        c = r["counts"]
        evidence.setdefault({"uvm": "managed", "ats": "system"}.get(p, p), {}).update(
            faults=c["faults"], migrated_bytes=c["h2d_bytes"], evicted_bytes=c["d2h_bytes"],
            remote_bytes=c["remote_gpu_pages"] * pb)
    for p in ("zerocopy", "system"):
        if p in evidence:
            evidence[p]["remote_bytes"] += unseen_pages * pb + short.get(p, 0)
    if "managed-prefetch" in evidence:
        evidence["managed-prefetch"]["how"] = PREFETCH_ESTIMATE
    if explicit["modelled_ms"] is not None:
        evidence["explicit"] = {k: explicit[k] for k in ("modelled_ms", "copy_in_bytes", "copy_out_bytes", "how")}
    return {"status": "modelled", "model_version": sim.VERSION, "machine": machine, "figures_source": src,
            "times": TIMES_VALIDATED if "cases" in checked else TIMES_NOTE,
            "page_bytes": pb, "page_note": page_note(pb),
            "recommended": best, "predicted_gain_vs_managed": base / t[best] if t[best] else None,
            "gain_base": {"ms": round(base * 1e3, 3), "source": MEASURED_BASE if measured else "modelled"},
            "hints": hints, "explicit": explicit, "evidence": evidence, "footprint": foot, "capacity": capacity,
            "advise_validated_error": checked,
            "validated_error": calibrated.validated("umsim", version=sim.VERSION)}


def resident_time_ns(stream: dict, driver_bytes: int, recorded_bytes) -> float:
    """The resident kernels' own time in a traced stream (trace.gpu_stream), less the time the migrations CUPTI's
    records lost (the driver's count over the recorded bytes) would have taken at the rate the faulting kernels
    moved the recorded ones: a kernel whose records were all lost looks resident."""
    res = stream.get("resident_kernel_ns", 0)
    lost = max(0, (driver_bytes or 0) - (recorded_bytes or 0))
    if not lost or not res:
        return res
    rate = (recorded_bytes or 0) / stream["faulting_kernel_ns"] if stream.get("faulting_kernel_ns") else 0
    return max(0.0, res - lost / rate) if rate else 0.0


def explicit_copies(u: dict, fig: dict, fits: bool, best: str, t_best: float, unseen_pages=0, min_in=0,
                    kept=0.0) -> dict:
    """The explicit mode beside the unified-memory candidates ("should I keep cudaMemcpy?"): what it would cost
    from the same replay's counts, whether it beats the recommended mode and by how much (unseen_pages: GPU reads
    a trace does not show, min_in: the driver's migrated bytes of a traced run, kept: the seconds of a traced run
    every mode keeps, its idle time and its resident kernels' time, as advise's)."""
    if not fits:
        return {"modelled_ms": None, "wins": None,
                "verdict": "explicit copies not modelled: the footprint exceeds GPU memory, so the program would "
                           "have to split its data into pieces that fit (cudaMalloc cannot hold it all)"}
    pb = u["page_bytes"]
    cin = max((u["h2d_fault_pages"] + u["h2d_prefetch_pages"] + u["h2d_counter_pages"]) * pb, min_in)
    cout = u["d2h_cpu_fault_pages"] * pb
    t_in, t_out = cin / (fig["h2d_gbps"] * 1e9), cout / (fig["d2h_gbps"] * 1e9)
    t_gpu = (u["gpu_events"] + unseen_pages) * pb / (fig["hbm_gbps"] * 1e9)
    t = t_in + t_out + t_gpu + kept
    out = {"modelled_ms": round(t * 1e3, 3), "copy_in_bytes": cin, "copy_out_bytes": cout,
           "copy_ms": round((t_in + t_out) * 1e3, 3), "compute_ms": round(t_gpu * 1e3, 3), "how": EXPLICIT_ESTIMATE,
           "against": best, "wins": t < t_best, "ratio": (t_best / t if t < t_best else t / t_best) if t and t_best
           else None}
    moved = (f"copies {format_size(cin)} in at h2d_gbps {fig['h2d_gbps']:g} GB/s"
             + (f" and {format_size(cout)} out at d2h_gbps {fig['d2h_gbps']:g} GB/s" if cout else
                " (the stream holds no CPU read-back of results, so no mode here pays for one)"))
    if out["ratio"] is None or out["ratio"] < 1.005:
        out.update(wins=False, tie=True)
        out["verdict"] = (f"explicit copies modelled the same as {best} (within 0.5%, {out['modelled_ms']:.4g} against "
                          f"{t_best * 1e3:.4g} ms): it {moved}; keeping cudaMemcpy gains nothing and loses nothing "
                          "here")
    elif t < t_best:
        out["verdict"] = (f"keep cudaMemcpy: explicit copies modelled {out['ratio']:.2f}x faster than {best} "
                          f"({out['modelled_ms']:.4g} against {t_best * 1e3:.4g} ms): it {moved} with no faults")
    else:
        room = t_best - t_gpu  # what the recommended mode spends beyond explicit's compute at HBM rate
        when = (f"explicit would win if its copies took under {room * 1e3:.4g} ms ({best}'s time beyond the compute "
                f"at HBM rate), i.e. at more than {(t_in + t_out) / room:.3g}x these link figures" if room > 0 else
                f"explicit cannot win here: {best} takes no longer than explicit's compute alone")
        out["verdict"] = (f"explicit copies modelled {out['ratio']:.2f}x slower than {best} ({out['modelled_ms']:.4g} "
                          f"against {t_best * 1e3:.4g} ms): it {moved}; {when}")
    return out


def advise_validated(app=None, footprint=None, machine=VALIDATED_MACHINE, own_figures=True) -> dict:
    """advise's own validated error (the advised mode against the mode measured fastest) from model/validated.json's
    "advise" entry, as bench/advise_validate.py --write-validated wrote it: with this application and footprint's
    own result where that was a validated case, and, as `model` does, a note where the model version, the machine
    description or the figures differ from the validation's. Without an entry, says plainly that there is none."""
    v = calibrated.validated("advise", app, format_size(footprint) if app and footprint else None,
                            version=sim.UNTIMED)  # advise prices with the untimed replay
    if v.get("status"):
        return {"status": "not validated", "source": ADVISE_DOC, "text": NO_ADVISE_VALIDATION}
    v["source"] = v.get("doc") or ADVISE_DOC
    notes = [v["note"]] if v.get("note") else []
    if not app:
        notes.append("validated on the suite's applications, not on this trace's program")
        t = trace_validated_text()
        if t:
            notes.append(t)
    if machine != VALIDATED_MACHINE:
        notes.append(f"validated on {v.get('machine')} only, not on {machine}")
    elif not own_figures:
        notes.append("validated with the measuring machine's own figures (advise --figures); these are the packaged "
                     f"{VALIDATED_MACHINE} ones")
    v["note"] = "; ".join(notes) or None
    return dict(v, text=advise_text(v))


def trace_validated_text() -> str:
    """advise --trace's own check against measured runs of unmodified programs (model/validated.json's
    "advise_trace" entry, bench/thirdparty.py readvise --write-validated), '' where there is none."""
    v = calibrated.validated("advise_trace", version=sim.UNTIMED)
    if v.get("status"):
        return ""
    per = v.get("per_program") or {}
    errs = ", ".join(f"{n} {e['time_error']:+.0%}" for n, e in per.items() if e.get("time_error") is not None)
    gains = ", ".join(f"{n} {e['gain_error']:+.0%}" for n, e in per.items() if e.get("gain_error") is not None)
    return (f"from a trace, checked against measured runs of {v.get('programs')} unmodified programs "
            f"({', '.join(per)}: {v.get('repository')}) on {v.get('machine')}, GPU stream, 3 runs of each mode "
            f"measured (at {v.get('measured_at')}, predicted at {v.get('commit')}): the advised mode was the "
            f"fastest or within its band in {v.get('hits')} of {v.get('programs')}; its modelled time off by {errs}; "
            f"the gain over managed off by {gains}; explicit copies' verdict right in {v.get('explicit_right')} of "
            f"{v.get('explicit_cases')} ({v.get('data')}, {v.get('doc')})"
            + (f"; {v['note']}" if v.get("note") else ""))


def advise_text(v: dict) -> str:
    """advise's validated error in one line: the share of hits, the time lost on a miss, the gain's error, the
    explicit verdicts, this case's own result, the source and the notes."""
    pc = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
    t = (f"validated error of advise ({v.get('cases')} application x footprint cases on {v.get('machine')}, "
         f"at least {v.get('runs')} runs of every mode, commit {v.get('commit')}): the advised mode was the fastest "
         f"or within the fastest's run-to-run band in {v.get('hits')} of {v.get('cases')} ({pc(v.get('share'))}) by "
         f"the whole run, {v.get('hits_iteration')} of {v.get('cases_iteration')} by the per-iteration time; "
         + (f"when not, {pc(v.get('lost_median'))} slower (median of {v.get('misses')}, at most "
            f"{pc(v.get('lost_max'))})" if v.get("misses") else "no case missed, so no time lost")
         + f"; the predicted gain over managed off by a median {pc(v.get('gain_error_median'))} (90th percentile "
         f"{pc(v.get('gain_error_p90'))}); explicit copies' verdict right in {v.get('explicit_right')} of "
         f"{v.get('explicit_cases')}")
    c = v.get("this_case")
    if isinstance(c, dict):
        t += (f"; this case: advised {c.get('advised')}, measured fastest {c.get('fastest')}, "
              + ("a hit" if c.get("hit") else f"{pc(c.get('lost'))} lost"))
    return t + f" ({v['source']})" + (f"; {v['note']}" if v.get("note") else "")
