"""`umscope simulate`, `umscope model`, `umscope advise`: what-if answers from the simulator and the
calibrated model. Every figure these commands print is modelled and says so. The replays behind them are
model/driver.py."""

import json
import os
import sys
from pathlib import Path

from umscope import inputs, validate
from umscope.errors import UsageError
from umscope.model import apps as model_apps
from umscope.model import calibrated, dos
from umscope.model import simulate as sim
from umscope.model import trace as umtrace
from umscope.model.driver import (MAX_SIM_DOS, MAX_SIM_FOOTPRINT, SIM_INT_OPTIONS, VALIDATED_MACHINE,
                                  driver_here, validated_for, advise, check_extra, page_note, simulate_all,
                                  gpu_work_note, trace_completeness)
from umscope.sizes import format_size

LABEL = "MODELLED (not measured)"
MACHINE_HELP = ("model figures: h100-sxm-pcie5 (default: the project's measured H100, not this machine) or gh200 "
                "(the studies' published figures, the rest borrowed from the H100 and named)")
SIM_FIGURES_HELP = ("this machine's own figures: those a run in the store (or a JSON-lines file of records) "
                    "measured (migration, cpu-stream, copy: bulk and first-pass migration, link and HBM rates), over "
                    "--machine's; the fault cost per batch is calibrated again from them")
PAGE_HELP = ("page size the simulator replays at (default 4K, the driver's); umsim refuses, in one line, a footprint "
             "whose page state does not fit in this machine's memory and says what fits: a page 16 times larger "
             "fits 16 times more (counts are then per page of that size: docs/simulator.md)")


def _app_argument(help_, facts, **kw):
    """Adds the command's application argument when it is parsed (its command given, or its help asked): the help
    lists the applications whose facts (model/apps.py `facts`: simulated or access) come from `umbench list
    --json`, a process no other command should start. Without a usable umbench the help says why; an
    application then fails with the registry's one-line reason, while --trace works without it."""
    def add(p):
        try:
            known = ", ".join(getattr(model_apps, facts)())
        except UsageError as exc:
            known = f"(unknown here: {exc})"
        p.add_argument("app", help=help_ + known, **kw)
    return add


def add_parsers(sub):
    s = sub.add_parser("simulate", help="replay an application or a trace through unified-memory policy models "
                                        "(no GPU needed)")
    s.lazy_options = _app_argument("application stream: ", "simulated", nargs="?")
    s.add_argument("--trace", metavar="FILE", help="a umsim trace or libumtrace JSON lines instead of an application")
    s.add_argument("--policy", default="all", help="uvm, svm, ats, zerocopy or all (default all)")
    s.add_argument("--footprint", default="1G", help="application footprint (default 1G)")
    s.add_argument("--capacity", help="GPU memory available (default: the machine's)")
    s.add_argument("--dos", help="degree of oversubscription in percent: capacity = footprint*100/DOS "
                                 f"(above 0, at most {MAX_SIM_DOS:g})")
    s.add_argument("--iterations", help=f"iterations of the application's stream, 1-{validate.MAX_ITERATIONS}")
    s.add_argument("--reverse", action="store_true", help="jacobi2d: second sweep bottom-up (Cooper et al. Alg. 2)")
    s.add_argument("--eviction", choices=sim.EVICTIONS)
    s.add_argument("--prefetch", choices=("on", "off"))
    for opt, (lo, hi, help_) in SIM_INT_OPTIONS.items():
        s.add_argument("--" + opt, help=f"{help_} ({lo}-{hi})")
    s.add_argument("--unit", help="VA block / SVM range / counter region size")
    s.add_argument("--page", help=PAGE_HELP)
    s.add_argument("--machine", default="h100-sxm-pcie5", help=MACHINE_HELP)
    s.add_argument("--figures", metavar="RUN|FILE", help=SIM_FIGURES_HELP)
    s.add_argument("--store", help="results store for --figures RUN")
    s.add_argument("--sweep", choices=("cooper", "schieffer", "all"),
                   help="the degree-of-oversubscription sweeps of the studies, compared with their published shapes")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("model", help="predicted time per phase of an application in each memory mode")
    s.lazy_options = _app_argument("application: ", "access")
    s.add_argument("--mode", default="all", help="a mode or all")
    s.add_argument("--calibration", metavar="FILE|RUN",
                   help="the application's explicit-mode record(s): a JSON record, a JSON-lines file of records "
                        "(e.g. docs/model-validation-raw-run2.jsonl; several explicit runs give each phase's "
                        "median), or a run id in the store")
    s.add_argument("--figures", metavar="RUN|FILE", help="take the machine figures a run in the store (or a "
                   "JSON-lines file of records) measured (migration, firsttouch, faults, cpu-stream, gpu-stream) "
                   "over --machine's")
    s.add_argument("--store", help="results store for --calibration RUN and --figures RUN")
    s.add_argument("--machine", default="h100-sxm-pcie5", help=MACHINE_HELP)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("advise", help="recommended memory mode and hints, with the predicted gain and the evidence")
    s.lazy_options = _app_argument("application: ", "simulated", nargs="?")
    s.add_argument("--trace", metavar="FILE", help="a profiled program's trace (libumtrace JSON lines or umsim)")
    s.add_argument("--footprint", default="1G")
    s.add_argument("--capacity", help="GPU memory available (default: the machine's)")
    s.add_argument("--iterations", help=f"iterations of the application's stream, 1-{validate.MAX_ITERATIONS}")
    s.add_argument("--page", help=PAGE_HELP)
    s.add_argument("--machine", default="h100-sxm-pcie5", help=MACHINE_HELP)
    s.add_argument("--figures", metavar="RUN|FILE", help=SIM_FIGURES_HELP)
    s.add_argument("--store", help="results store for --figures RUN")
    s.add_argument("--json", action="store_true")
    return {"simulate": cmd_simulate, "model": cmd_model, "advise": cmd_advise}


def _stream(args, tmpdir):
    """umsim parameters for the stream: an application or a trace file (converted when it is JSON lines)."""
    if bool(args.app) == bool(args.trace):
        raise UsageError("give an application or --trace FILE (one of them)")
    if args.app:
        if args.app not in sim.SIM_APPS:
            raise UsageError(f"unknown application {args.app!r} for the simulator (known: {', '.join(sim.SIM_APPS)})")
        p = {"app": args.app, "footprint": _size(args.footprint, "--footprint", MAX_SIM_FOOTPRINT)}
        if getattr(args, "iterations", None) is not None:
            p["iterations"] = validate.iterations(args.iterations)
        elif args.app in dos.ITERATIONS:
            p["iterations"] = dos.ITERATIONS[args.app]
        if getattr(args, "reverse", False):
            p["reverse"] = True
        return p, p["footprint"]
    kind, data = inputs.read_trace(args.trace)  # read once: a pipe (--trace <(zcat t.gz)) works too
    if kind == "umsim":
        out = Path(tmpdir) / "trace.umstrace"
        out.write_bytes(data)
        return {"trace": str(out)}, None
    tr = umtrace.from_umtrace(data)
    if not tr["events"]:
        raise UsageError(f"{validate.printable(args.trace)}: no unified-memory events to replay (was it written by "
                         "--um-trace?)")
    out = Path(tmpdir) / "trace.umstrace"
    umtrace.write(out, tr)
    args.trace_note = trace_completeness(tr)
    args.work_note = gpu_work_note(tr)  # kernels that did not complete, faults outside every allocation
    args.trace_source = tr.get("gpu_source")  # the GPU's accesses: CUPTI's records or the driver's own events
    args.unseen_bytes = tr["prefetched_unseen_bytes"]  # prefetched by the driver, then reached unseen (advise)
    args.traced = {"stream": tr["stream"], "driver_htod_bytes": tr["driver_htod_bytes"],  # measured (advise)
                   "recorded_htod_bytes": tr["recorded_htod_bytes"]}
    return {"trace": str(out)}, sum(n for _, n in tr["allocs"]) * 4096


def _capacity(args, footprint, fig_doc, page=4096):
    """GPU memory the replay has: --capacity, footprint*100/--dos, or the machine's; at least one page."""
    if getattr(args, "dos", None) is not None:
        d = validate.real(args.dos, "--dos (percent)", 0.0, MAX_SIM_DOS)
        if not footprint:
            raise UsageError("--dos needs an application footprint")
        cap = min(footprint * 100 / d, 2.0 * MAX_SIM_FOOTPRINT)  # a float: 1e-300 percent is no overflow
        what = f"--dos {d:g} of a {format_size(footprint)} footprint"
    elif args.capacity:
        cap, what = _size(args.capacity, "--capacity", MAX_SIM_FOOTPRINT), "--capacity"
    else:
        return int(fig_doc.get("capacity_gib", 80) * (1 << 30))
    if not page <= cap <= MAX_SIM_FOOTPRINT:
        raise UsageError(f"{what} gives {format_size(int(cap))} of GPU memory: the simulator takes from one page "
                         f"({format_size(page)}) to {format_size(MAX_SIM_FOOTPRINT)}")
    return int(cap)


def _size(text, what, hi):
    n = validate.size(text, what)
    if n > hi:
        raise UsageError(f"{what} must be at most {format_size(hi)}, got {validate.printable(text)[:40]}")
    return n


def _policies(text, ats):
    pols = list(sim.POLICIES) if text == "all" else text.split(",")
    for p in pols:
        if p not in sim.POLICIES:
            raise UsageError(f"unknown policy {p!r} (uvm, svm, ats, zerocopy, all)")
    return pols


def sim_options(args) -> dict:
    """The umsim options of simulate's command line, each checked against its declared limits
    (SIM_INT_OPTIONS) and check_extra."""
    extra = {k: getattr(args, k) for k in ("eviction", "prefetch") if getattr(args, k, None) is not None}
    for opt, (lo, hi, _) in SIM_INT_OPTIONS.items():
        k = opt.replace("-", "_")
        if getattr(args, k, None) is not None:
            extra[k] = validate.integer(getattr(args, k), "--" + opt, lo, hi)
    for k in ("unit", "page"):
        if getattr(args, k, None):
            extra[k] = _size(getattr(args, k), "--" + k, MAX_SIM_FOOTPRINT)
    check_extra(extra)
    return extra


def cmd_simulate(args):
    import tempfile
    if args.sweep:
        return _sweep(args)
    fig_doc = dos.figures(args.machine)
    extra = sim_options(args)
    with tempfile.TemporaryDirectory() as tmp:
        stream, foot = _stream(args, tmp)
        cap = _capacity(args, foot, fig_doc, extra.get("page", 4096))
        pols = _policies(args.policy, fig_doc.get("ats"))
        fig, src = sim_figures(args)  # calibrating the fault cost runs umsim: after every check
        drv = driver_here()
        recs = simulate_all(stream, cap, pols, fig, extra, drv, progress=_progress(args))
    for r in recs:
        r["inputs"]["figures_source"] = src
        r["inputs"]["driver_parameters"] = drv or "not readable here: the open driver's defaults"
        note = page_note(r["counts"]["page_bytes"])
        if note:
            r["inputs"]["page_note"] = note
        if getattr(args, "trace_note", ""):
            r["inputs"]["trace"] = args.trace_note
        if getattr(args, "work_note", ""):
            r["inputs"]["gpu_work"] = args.work_note
        if getattr(args, "trace_source", None):
            r["inputs"]["trace_gpu_accesses_from"] = args.trace_source
    if args.json:
        print(json.dumps(recs, indent=1))
        return 0
    c0 = recs[0]["counts"]
    print(f"{LABEL}: {c0['app']} footprint {format_size(c0['footprint_pages'] * c0['page_bytes'])}, GPU capacity "
          f"{format_size(c0['capacity_pages'] * c0['page_bytes'])} (DOS {100 * c0['footprint_pages'] / max(1, c0['capacity_pages']):.1f}), "
          f"{c0['page_bytes'] // 1024} KiB pages; model {sim.VERSION}")
    print(f"times from: {src}")
    if recs[0]["inputs"].get("page_note"):
        print(recs[0]["inputs"]["page_note"])
    print(f"driver parameters: {drv or 'not readable here; open-driver defaults (batch 256, prefetch threshold 51%, thrashing threshold 3, counter threshold 256)'}")
    print(f"{'policy':<9} {'faults':>9} {'batches':>8} {'migr.':>8} {'in MiB':>9} {'evict.':>7} {'out MiB':>9} "
          f"{'remote MiB':>10} {'hits':>9} {'modelled ms':>11}")
    for r in recs:
        c, t = r["counts"], r["modelled_seconds"]
        mib = c["page_bytes"] / 2 ** 20
        print(f"{c['policy']:<9} {c['faults']:>9} {c['batches']:>8} {c['migrations']:>8} "
              f"{c['h2d_bytes'] / 2 ** 20:>9.1f} {c['evictions']:>7} {c['d2h_bytes'] / 2 ** 20:>9.1f} "
              f"{c['remote_gpu_pages'] * mib:>10.1f} {c['hits']:>9} {t['total'] * 1e3:>11.2f}")
    if getattr(args, "trace_note", ""):
        print(f"INCOMPLETE TRACE: {args.trace_note}")
    if getattr(args, "work_note", ""):
        print(f"GPU WORK NOT AS LAUNCHED: {args.work_note}")
    if getattr(args, "trace_source", None):
        print(f"the trace's GPU accesses from: {args.trace_source}")
    print(f"simulator speed: {recs[-1]['counts']['events_per_s'] / 1e6:.1f} M page events/s")
    print(calibrated.validated_text(recs[0]["validated_error"]))
    return 0


def _progress(args):
    """Progress lines of long replays on stderr (not with --json)."""
    return None if args.json else (lambda m: print(f"  {m}", file=sys.stderr, flush=True))


def _sweep(args):
    if args.app or args.trace:
        raise UsageError("--sweep runs the studies' own applications: give no application or --trace with it")
    prog = (lambda m: print(f"  {m}", file=sys.stderr, flush=True)) if not args.json else None
    res = {}
    if args.sweep in ("cooper", "all"):
        res["cooper"] = dos.cooper(progress=prog)
    if args.sweep in ("schieffer", "all"):
        res["schieffer"] = dos.schieffer(progress=prog)
    rows = dos.compare(res.get("cooper", {"curves": {}}), res.get("schieffer", {"curves": {}}))
    if args.json:
        print(json.dumps({"status": "modelled", "model_version": sim.VERSION, "comparison": rows,
                          "figures": {k: v["figures_source"] for k, v in res.items()},
                          "validated_error": calibrated.validated("umsim", version=sim.VERSION)}, indent=1,
                         default=str))
        return 0
    print(f"{LABEL}: shapes of the simulated curves against the published ones (model {sim.VERSION}; "
          f"times from {'; '.join(v['figures_source'] for v in res.values())})")
    print(calibrated.validated_text(calibrated.validated("umsim", version=sim.VERSION)))
    what = None
    for r in rows:
        xs = r.get("dos") or r.get("ratios")
        ys = r.get("relative") or r.get("speedup")
        axis = ("DOS (%): throughput relative to DOS 78" if r.get("dos") else
                "footprint / GPU memory: speedup of system memory (ATS) over managed memory (UVM)")
        if axis != what:
            print(f"  curves below: {axis}")
            what = axis
        knee = "" if r["published_knee"] is None else (f" knee {r['knee_dos']} vs published {r['published_knee']} "
                                                        f"({'within' if r['knee_within_15'] else 'outside'} 15)")
        pub = r["published_monotone"] or "no published curve"
        print(f"{r['figure']:<22} {r['policy']:<8} {r['app']:<17} {r['monotone']:<13} (published {pub}){knee}")
        print("    " + " ".join(f"{x}:{y:.2f}" for x, y in zip(xs, ys)))
    return 0


# ------------------------------------------------------------------ model
def _store(args):
    """The results store for --calibration RUN and --figures RUN, opened read-only (it must exist already)."""
    from umscope.store import Store, default_store_path
    path = Path(args.store) if args.store else default_store_path()
    if args.store is not None and str(args.store).strip() and not os.path.lexists(path):
        raise UsageError(f"no results store at {validate.printable(path)} (give --store, or a file)")
    return Store(path if args.store is None or str(args.store).strip() else args.store, readonly=True)


def _run_records(args, run: str, what: str) -> tuple:
    rid = validate.run_id(run, what)
    st = _store(args)
    try:
        st.run(rid)  # a usage error where the store has no such run
        return [inputs.flat(r) for r in st.records(rid)], f"run {rid} of {st.path}"
    finally:
        st.close()


def _calibration(args):
    """The application's explicit-mode calibration: one record, or each phase's median of several."""
    if args.calibration is None:
        raise UsageError("model needs the application's explicit-mode record: run `umscope app run "
                         f"{args.app} --mode explicit` and pass --calibration RUN, or a JSON (lines) file of records "
                         "such as docs/model-validation-raw-run2.jsonl (the H100's held-out run)")
    c = args.calibration
    recs, src = _records_from(args, c, "--calibration")
    mine = [r for r in recs if r.get("app") == args.app and r.get("mode") == "explicit"]
    if not mine:
        apps = sorted({str(r.get("app")) for r in recs if r.get("mode") == "explicit" and r.get("app")})
        raise UsageError(f"--calibration {c}: no explicit-mode record of {args.app}"
                         + (f" (it has {', '.join(apps)})" if apps else ""))
    # One configuration: the first record's footprint (and gemm's precision and variant).
    key = lambda r: (r.get("bytes"), r.get("precision"), r.get("variant"))  # noqa: E731
    same = [r for r in mine if key(r) == key(mine[0])]
    for r in same:
        calibrated.check_calibration(r, f"--calibration {validate.printable(c)[:80]}")
    cal = calibrated.calibration(same)
    if len(same) > 1:
        src += f" ({len(same)} explicit runs of {args.app}: each phase's median)"
    return cal, src


def _records_from(args, f, what) -> tuple:
    """(records, where) of a file (JSON or JSON lines) or a run id in the store."""
    text = str(f)
    if text.isascii() and text.strip().isdigit() and not os.path.lexists(text):
        return _run_records(args, text, what)
    if os.path.lexists(text) or os.sep in text or not text.strip():
        return inputs.read_records(text, what), f"file {validate.printable(text)}"
    raise UsageError(f"{what} {validate.printable(text)[:80]!r}: neither a file nor a run id")


def _figures(args, fig, src):
    """--figures RUN|FILE: the machine figures those records measured, over the machine description's."""
    f = args.figures
    recs, where = _records_from(args, f, "--figures")
    measured = calibrated.checked_figures(recs, f"--figures {validate.printable(f)[:80]}")
    if not measured:
        raise UsageError(f"--figures {validate.printable(f)[:80]}: no migration, firsttouch, faults, cpu-stream or "
                         "gpu-stream records")
    fig.update(measured)
    return f"{where}: " + ", ".join(sorted(measured)) + f"; the rest: {src}"


def cmd_model(args):
    if args.app not in calibrated.ACCESS:
        raise UsageError(f"no access profile for {args.app!r} (known: {', '.join(calibrated.ACCESS)})")
    modes = list(calibrated.MODES) if args.mode == "all" else args.mode.split(",")
    for m in modes:
        if m not in calibrated.MODES:
            raise UsageError(f"unknown mode {m!r} (known: {', '.join(calibrated.MODES)}, all)")
    fig_doc = dos.figures(args.machine)
    fig, src = dos.machine_figures(args.machine)
    calib, csrc = _calibration(args)
    if args.figures is not None:
        src = _figures(args, fig, src)
    recs = []
    for m in modes:
        if m == "explicit":
            # The calibration itself: measured, an input of every prediction, not a prediction.
            recs.append({"type": "record", "family": "model", "status": "calibration (measured)", "app": args.app,
                         "mode": m, "phases_ms": {k: float(calib.get(k) or 0.0) for k in calibrated.PHASES},
                         "total_ms": sum(float(calib.get(k) or 0.0) for k in calibrated.PHASES),
                         "inputs": {"calibration": csrc}})
            continue
        try:
            p = calibrated.predict(args.app, m, calib, fig, ats=bool(fig_doc.get("ats")))
        except ValueError as e:
            recs.append({"app": args.app, "mode": m, "status": "not modelled", "reason": str(e)})
            continue
        recs.append(calibrated.record(args.app, m, p, src, csrc,
                                      validated_for(args.machine, args.app, m, args.figures is None)))
    if args.json:
        print(json.dumps(recs, indent=1))
        return 0
    print(f"{LABEL}: {args.app} on {args.machine} (figures: {src}); calibration: {csrc}; model {calibrated.VERSION}")
    print(f"{'mode':<17} " + " ".join(f"{k[:-3]:>9}" for k in calibrated.PHASES) + f" {'total ms':>10}"
          f"  {'validated error of this case':<28}")
    missing = set()
    for r in recs:
        if r.get("status") == "not modelled":
            print(f"{r['mode']:<17} {r['status']}: {r['reason']}")
            continue
        if r["status"] != "modelled":
            note = "MEASURED: the calibration, not predicted"
        else:
            this = r["validated_error"].get("this_case")
            note = "not validated" if this is None else f"{this:+.1%}"
            missing.update(r["inputs"].get("figures_missing") or ())
        print(f"{r['mode']:<17} " + " ".join(f"{r['phases_ms'][k]:>9.1f}" for k in calibrated.PHASES)
              + f" {r['total_ms']:>10.1f}  {note}")
    if args.machine != VALIDATED_MACHINE:
        print(f"the calibration's phases (kernel time, context, allocation, CPU initialisation, explicit's copies) "
              f"are those of the machine it was measured on, not of {args.machine}")
    if missing:
        print(f"figures missing from {args.machine} (their terms count 0 or fall back as calibrated.py says): "
              + ", ".join(sorted(missing)))
    print(calibrated.validated_text(validated_for(args.machine, args.app, "", args.figures is None)))
    return 0


def sim_figures(args) -> tuple:
    """The simulator's figures: --machine's description, with --figures RUN|FILE's measurements over it and
    the fault cost per batch calibrated again from them."""
    fig, src = dos.machine_figures(args.machine)
    if getattr(args, "figures", None) is None:
        return fig, src
    if dos.figures(args.machine)["source"].startswith("paper:"):
        raise UsageError(f"--figures replaces a measured machine's figures; {args.machine} is a published "
                         "description: leave --machine at h100-sxm-pcie5 (or another measured one)")
    recs, where = _records_from(args, args.figures, "--figures")
    measured = calibrated.checked_figures(recs, f"--figures {validate.printable(args.figures)[:80]}")
    if not measured:
        raise UsageError(f"--figures {validate.printable(args.figures)[:80]}: no migration, firsttouch, faults, "
                         "cpu-stream, gpu-stream or copy records")
    base = dict(dos.figures(args.machine)["figures"], **measured)
    fig = dos.calibrate(base)
    src = (f"{where}: {', '.join(sorted(measured))}; the rest: {src}"
           + (f"; {fig['calibration']}" if fig.get("calibration") else ""))
    return fig, src


def cmd_advise(args):
    import tempfile
    fig_doc = dos.figures(args.machine)
    extra = {"page": _size(args.page, "--page", MAX_SIM_FOOTPRINT)} if args.page else {}
    if extra.get("page", 0) > 2 << 20:
        raise UsageError("advise --page is at most 2M (the VA block; `umscope simulate` takes --unit for more)")
    check_extra(extra)
    with tempfile.TemporaryDirectory() as tmp:
        args.reverse = False
        stream, foot = _stream(args, tmp)
        cap = _capacity(args, foot, fig_doc, extra.get("page", 4096))
        res = advise(stream, foot, cap, args.machine, figures=sim_figures(args), extra=extra,
                     progress=_progress(args), own_figures=args.figures is not None,
                     unseen_bytes=getattr(args, "unseen_bytes", 0), traced=getattr(args, "traced", None))
    if getattr(args, "trace_note", ""):
        res["trace"] = args.trace_note
        res["hints"].append(f"INCOMPLETE TRACE: {args.trace_note}")
    if getattr(args, "work_note", ""):  # first: every other line rests on the work having run
        res["gpu_work"] = args.work_note
        res["hints"].insert(0, f"GPU WORK NOT AS LAUNCHED: {args.work_note}")
    if args.trace:  # a traced program: the advice applied from outside where that needs no change to its source
        from umscope import place
        pol = place.AS_ADVISED.get(res["recommended"])
        if pol:
            res["run_as"] = f"umscope place --managed {pol} -- PROGRAM ARGS"
            res["hints"].append(f"without a source change, for a program using cudaMallocManaged: {res['run_as']} "
                                "(libumtrace applies it to every managed range; docs/place.md)")
    if args.app:
        # The advice is for the stream replayed: say how many iterations, and whose choice that was (the
        # application's model facts replay the studies' count, which need not be what `app run` runs).
        res["iterations"] = stream.get("iterations")
        res["iterations_source"] = ("as --iterations asked" if getattr(args, "iterations", None) is not None else
                                    "the count its model facts give; pass --iterations to match your run")
    if args.app and args.app in calibrated.ACCESS and calibrated.ACCESS[args.app][1] == 0.0:
        res["hints"].append("the inputs are only read: cudaMemAdviseSetReadMostly lets the GPU keep a copy "
                            "without invalidating the CPU's")
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    what = args.app or args.trace
    print(f"{LABEL}: advice for {what} on {args.machine} (figures: {res['figures_source']}; model {sim.VERSION})")
    if res["page_note"]:
        print(res["page_note"])
    if res.get("iterations") is not None:
        print(f"replays {res['iterations']} iteration(s) of {what}'s stream: {res['iterations_source']}")
    gain = res["predicted_gain_vs_managed"]
    against = ("plain managed memory" if res["gain_base"]["source"] == "modelled" else
               f"plain managed memory as the trace measured it ({res['gain_base']['ms']:.4g} ms)")
    print(f"recommended: {res['recommended']}  (modelled {'an unknown gain' if gain is None else f'{gain:.2f}x'} "
          f"against {against}; {res['times']})")
    print(f"  {res['advise_validated_error']['text']}")
    for h in res["hints"]:
        print(f"  - {h}")
    print(f"explicit (cudaMemcpy): {res['explicit']['verdict']}")
    print(f"  {res['advise_validated_error']['text']}")
    print(calibrated.validated_text(res["validated_error"]))
    print("evidence (modelled):")
    for p, e in res["evidence"].items():
        print(f"  {p:<17} " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in e.items()
                                       if k != "how") + (f" ({e['how']})" if e.get("how") else ""))
    return 0
