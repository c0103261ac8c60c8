"""`umscope simulate`, `umscope model`, `umscope advise`: what-if answers from the simulator and the
calibrated model. Every figure these commands print is modelled and says so."""

import json
import sys
from pathlib import Path

from umscope.errors import UsageError
from umscope.model import calibrated, dos
from umscope.model import simulate as sim
from umscope.model import trace as umtrace
from umscope.sizes import format_size, parse_size

LABEL = "MODELLED (not measured)"


def add_parsers(sub):
    s = sub.add_parser("simulate", help="replay an application or a trace through unified-memory policy models "
                                        "(no GPU needed)")
    s.add_argument("app", nargs="?", help="application stream: " + ", ".join(sim.SIM_APPS))
    s.add_argument("--trace", metavar="FILE", help="a umsim trace or libumtrace JSON lines instead of an application")
    s.add_argument("--policy", default="all", help="uvm, svm, ats, zerocopy or all (default all)")
    s.add_argument("--footprint", default="1G", help="application footprint (default 1G)")
    s.add_argument("--capacity", help="GPU memory available (default: the machine's)")
    s.add_argument("--dos", type=float, help="degree of oversubscription in percent: capacity = footprint*100/DOS")
    s.add_argument("--iterations", type=int)
    s.add_argument("--reverse", action="store_true", help="jacobi2d: second sweep bottom-up (Cooper et al. Alg. 2)")
    s.add_argument("--eviction", choices=sim.EVICTIONS)
    s.add_argument("--prefetch", choices=("on", "off"))
    s.add_argument("--prefetch-threshold", type=int)
    s.add_argument("--batch", type=int, help="fault batch size")
    s.add_argument("--thrash-threshold", type=int, help="0 turns thrashing detection off")
    s.add_argument("--counter-threshold", type=int)
    s.add_argument("--unit", help="VA block / SVM range / counter region size")
    s.add_argument("--page", help="page size (default 4K)")
    s.add_argument("--machine", default="h100-sxm-pcie5", help="model figures: h100-sxm-pcie5 or gh200")
    s.add_argument("--sweep", choices=("cooper", "schieffer", "all"),
                   help="the degree-of-oversubscription sweeps of the studies, compared with their published shapes")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("model", help="predicted time per phase of an application in each memory mode")
    s.add_argument("app", help="application: " + ", ".join(calibrated.ACCESS))
    s.add_argument("--mode", default="all", help="a mode or all")
    s.add_argument("--calibration", metavar="FILE|RUN",
                   help="the application's explicit-mode record: a JSON file, or a run id in the store")
    s.add_argument("--figures", metavar="RUN", help="take the machine figures a run in the store measured "
                                                   "(migration, firsttouch, faults, cpu-stream) over --machine's")
    s.add_argument("--store", help="results store for --calibration RUN and --figures RUN")
    s.add_argument("--machine", default="h100-sxm-pcie5", help="model figures: h100-sxm-pcie5 or gh200")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("advise", help="recommended memory mode and hints, with the predicted gain and the evidence")
    s.add_argument("app", nargs="?", help="application: " + ", ".join(sim.SIM_APPS))
    s.add_argument("--trace", metavar="FILE", help="a profiled program's trace (libumtrace JSON lines or umsim)")
    s.add_argument("--footprint", default="1G")
    s.add_argument("--capacity", help="GPU memory available (default: the machine's)")
    s.add_argument("--iterations", type=int)
    s.add_argument("--machine", default="h100-sxm-pcie5", help="h100-sxm-pcie5 or gh200")
    s.add_argument("--json", action="store_true")
    return {"simulate": cmd_simulate, "model": cmd_model, "advise": cmd_advise}


def _driver():
    try:
        from umscope import probe
        return sim.driver_params(probe.uvm_params())
    except Exception:  # noqa: BLE001 - the driver's parameters are optional
        return {}


def _stream(args, tmpdir):
    """umsim parameters for the stream: an application or a trace file (converted when it is JSON lines)."""
    if bool(args.app) == bool(args.trace):
        raise UsageError("give an application or --trace FILE (one of them)")
    if args.app:
        if args.app not in sim.SIM_APPS:
            raise UsageError(f"unknown application {args.app!r} for the simulator (known: {', '.join(sim.SIM_APPS)})")
        p = {"app": args.app, "footprint": parse_size(args.footprint)}
        if getattr(args, "iterations", None):
            p["iterations"] = args.iterations
        elif args.app in dos.ITERATIONS:
            p["iterations"] = dos.ITERATIONS[args.app]
        if getattr(args, "reverse", False):
            p["reverse"] = True
        return p, p["footprint"]
    path = Path(args.trace)
    if not path.exists():
        raise UsageError(f"no trace file {path}")
    with open(path, "rb") as f:
        head = f.read(8)
    if head == b"UMSTRACE":
        return {"trace": str(path)}, None
    tr = umtrace.from_umtrace(umtrace.read_jsonl(path))
    if not tr["events"]:
        raise UsageError(f"{path}: no unified-memory events to replay (was it written by --um-trace?)")
    out = Path(tmpdir) / "trace.umstrace"
    umtrace.write(out, tr)
    return {"trace": str(out)}, sum(n for _, n in tr["allocs"]) * 4096


def _capacity(args, footprint, fig_doc):
    if getattr(args, "dos", None):
        if args.dos <= 0:
            raise UsageError("--dos must be positive")
        if not footprint:
            raise UsageError("--dos needs an application footprint")
        return int(footprint * 100 / args.dos)
    if args.capacity:
        return parse_size(args.capacity)
    return int(fig_doc.get("capacity_gib", 80) * (1 << 30))


def _policies(text, ats):
    pols = list(sim.POLICIES) if text == "all" else text.split(",")
    for p in pols:
        if p not in sim.POLICIES:
            raise UsageError(f"unknown policy {p!r} (uvm, svm, ats, zerocopy, all)")
    return pols


def simulate_all(stream, capacity, policies, fig, extra, drv):
    out = []
    for pol in policies:
        p = dict(stream, capacity=capacity, policy=pol)
        if pol == "uvm":
            p.update(drv)
        if pol == "svm" and "unit" not in extra:
            p["unit"] = max(4096, capacity // 64)
        p.update(extra)
        s = sim.run(p)
        out.append(sim.record(s, fig, extra.get("_src", ""), {"params": {k: str(v) for k, v in p.items()}}))
    return out


def cmd_simulate(args):
    import tempfile
    if args.sweep:
        return _sweep(args)
    fig_doc = dos.figures(args.machine)
    fig, src = dos.machine_figures(args.machine)
    extra = {k: getattr(args, k) for k in ("eviction", "prefetch", "prefetch_threshold", "batch", "thrash_threshold",
                                           "counter_threshold") if getattr(args, k) is not None}
    for k in ("unit", "page"):
        if getattr(args, k):
            extra[k] = parse_size(getattr(args, k))
    with tempfile.TemporaryDirectory() as tmp:
        stream, foot = _stream(args, tmp)
        cap = _capacity(args, foot, fig_doc)
        drv = _driver()
        recs = simulate_all(stream, cap, _policies(args.policy, fig_doc.get("ats")), fig, extra, drv)
    for r in recs:
        r["inputs"]["figures_source"] = src
        r["inputs"]["driver_parameters"] = drv or "not readable here: the open driver's defaults"
    if args.json:
        print(json.dumps(recs, indent=1))
        return 0
    c0 = recs[0]["counts"]
    print(f"{LABEL}: {c0['app']} footprint {format_size(c0['footprint_pages'] * c0['page_bytes'])}, GPU capacity "
          f"{format_size(c0['capacity_pages'] * c0['page_bytes'])} (DOS {100 * c0['footprint_pages'] / max(1, c0['capacity_pages']):.1f}), "
          f"{c0['page_bytes'] // 1024} KiB pages; model {sim.VERSION}")
    print(f"times from: {src}")
    print(f"driver parameters: {drv or 'not readable here; open-driver defaults (batch 256, prefetch threshold 51%, thrashing threshold 3, counter threshold 256)'}")
    print(f"{'policy':<9} {'faults':>9} {'batches':>8} {'migr.':>8} {'in MiB':>9} {'evict.':>7} {'out MiB':>9} "
          f"{'remote MiB':>10} {'hits':>9} {'modelled ms':>11}")
    for r in recs:
        c, t = r["counts"], r["modelled_seconds"]
        mib = c["page_bytes"] / 2 ** 20
        print(f"{c['policy']:<9} {c['faults']:>9} {c['batches']:>8} {c['migrations']:>8} "
              f"{c['h2d_bytes'] / 2 ** 20:>9.1f} {c['evictions']:>7} {c['d2h_bytes'] / 2 ** 20:>9.1f} "
              f"{c['remote_gpu_pages'] * mib:>10.1f} {c['hits']:>9} {t['total'] * 1e3:>11.2f}")
    print(f"simulator speed: {recs[-1]['counts']['events_per_s'] / 1e6:.1f} M page events/s")
    print(calibrated.validated_text(recs[0]["validated_error"]))
    return 0


def _sweep(args):
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
    for r in rows:
        xs = r.get("dos") or r.get("ratios")
        ys = r.get("relative") or r.get("speedup")
        knee = "" if r["published_knee"] is None else (f" knee {r['knee_dos']} vs published {r['published_knee']} "
                                                        f"({'within' if r['knee_within_15'] else 'outside'} 15)")
        print(f"{r['figure']:<22} {r['policy']:<8} {r['app']:<17} {r['monotone']:<13} (published "
              f"{r['published_monotone']}){knee}")
        print("    " + " ".join(f"{x}:{y:.2f}" for x, y in zip(xs, ys)))
    return 0


# ------------------------------------------------------------------ model
def _calibration(args):
    if not args.calibration:
        raise UsageError("model needs the application's explicit-mode record: run `umscope app run "
                         f"{args.app} --mode explicit` and pass --calibration RUN (or a JSON file of the record)")
    c = args.calibration
    if Path(c).exists():
        rec = json.loads(Path(c).read_text())
        return (rec[0] if isinstance(rec, list) else rec), f"file {c}"
    if not c.isdigit():
        raise UsageError(f"--calibration {c!r}: neither a file nor a run id")
    from umscope.store import Store
    st = Store(args.store)
    for r in st.records(int(c)):
        d = dict(r.get("extra") or {})
        d.update({k: v for k, v in r.items() if k != "extra" and v is not None})
        if d.get("app") == args.app and d.get("mode") == "explicit":
            return d, f"run {c} of {st.path}"
    raise UsageError(f"run {c} has no explicit-mode record of {args.app}")


def cmd_model(args):
    if args.app not in calibrated.ACCESS:
        raise UsageError(f"no access profile for {args.app!r} (known: {', '.join(calibrated.ACCESS)})")
    modes = list(calibrated.MODES) if args.mode == "all" else args.mode.split(",")
    for m in modes:
        if m not in calibrated.MODES:
            raise UsageError(f"unknown mode {m!r}")
    fig_doc = dos.figures(args.machine)
    fig, src = dos.machine_figures(args.machine)
    calib, csrc = _calibration(args)
    if args.figures:
        if not str(args.figures).isdigit():
            raise UsageError(f"--figures {args.figures!r}: not a run id")
        from umscope.store import Store
        measured, msrc = calibrated.figures_from_records(Store(args.store).records(int(args.figures)))
        if not measured:
            raise UsageError(f"run {args.figures} has no migration, firsttouch, faults or cpu-stream records")
        fig.update(measured)
        src = f"run {args.figures}: " + ", ".join(sorted(measured)) + f"; the rest: {src}"
    recs = []
    for m in modes:
        try:
            p = calibrated.predict(args.app, m, calib, fig, ats=bool(fig_doc.get("ats")))
        except ValueError as e:
            recs.append({"app": args.app, "mode": m, "status": "not modelled", "reason": str(e)})
            continue
        recs.append(calibrated.record(args.app, m, p, src, csrc))
    if args.json:
        print(json.dumps(recs, indent=1))
        return 0
    print(f"{LABEL}: {args.app} on {args.machine} (figures: {src}); calibration: {csrc}; model {calibrated.VERSION}")
    print(f"{'mode':<17} " + " ".join(f"{k[:-3]:>9}" for k in calibrated.PHASES) + f" {'total ms':>10}")
    for r in recs:
        if r.get("status") != "modelled":
            print(f"{r['mode']:<17} {r['status']}: {r['reason']}")
            continue
        print(f"{r['mode']:<17} " + " ".join(f"{r['phases_ms'][k]:>9.1f}" for k in calibrated.PHASES)
              + f" {r['total_ms']:>10.1f}")
    print(calibrated.validated_text(calibrated.validated("calibrated")))
    return 0


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


def advise(stream, foot, capacity, machine, iterations_note=""):
    fig_doc = dos.figures(machine)
    fig, src = dos.machine_figures(machine)
    drv = _driver() if machine == "h100-sxm-pcie5" else {}
    pols = ["uvm", "zerocopy"] + (["ats"] if fig_doc.get("ats") else [])
    recs = {r["counts"]["policy"]: r for r in simulate_all(stream, capacity, pols, fig, {}, drv)}
    t = {"managed": recs["uvm"]["modelled_seconds"]["total"], "zerocopy": recs["zerocopy"]["modelled_seconds"]["total"]}
    if "ats" in recs:
        t["system"] = recs["ats"]["modelled_seconds"]["total"]
    u = recs["uvm"]["counts"]
    pb = u["page_bytes"]
    fits = u["footprint_pages"] <= u["capacity_pages"]
    if fits:
        # Prefetch: every page the GPU needs moves once at bulk rate, no faults; then every access is local.
        moved = u["h2d_fault_pages"] + u["h2d_prefetch_pages"] + u["populate_gpu_pages"]
        t["managed-prefetch"] = (moved * pb / (fig["migrate_gbps"] * 1e9)
                                 + (u["gpu_events"]) * pb / (fig["hbm_gbps"] * 1e9))
    best = min(t, key=t.get)
    base = t["managed"]
    hints = [HINTS[best]]
    if not fits:
        hints.append(f"the footprint exceeds GPU memory (DOS {100 * u['footprint_pages'] / u['capacity_pages']:.0f}): "
                     f"managed memory evicts {u['evictions']} blocks and re-migrates; "
                     + ("thrashing detection mapped %d blocks remotely" % u["thrash_units"] if u["thrash_units"] else
                        "no thrashing detected"))
    evidence = {p: {"modelled_ms": round(v * 1e3, 3)} for p, v in t.items()}
    for p, r in recs.items():
        c = r["counts"]
        evidence.setdefault({"uvm": "managed", "ats": "system"}.get(p, p), {}).update(
            faults=c["faults"], migrated_bytes=c["h2d_bytes"], evicted_bytes=c["d2h_bytes"],
            remote_bytes=c["remote_gpu_pages"] * pb)
    return {"status": "modelled", "model_version": sim.VERSION, "machine": machine, "figures_source": src,
            "recommended": best, "predicted_gain_vs_managed": base / t[best] if t[best] else None,
            "hints": hints, "evidence": evidence, "footprint": foot, "capacity": capacity,
            "validated_error": calibrated.validated("umsim", version=sim.VERSION)}


def cmd_advise(args):
    import tempfile
    fig_doc = dos.figures(args.machine)
    with tempfile.TemporaryDirectory() as tmp:
        args.reverse = False
        stream, foot = _stream(args, tmp)
        cap = _capacity(args, foot, fig_doc)
        res = advise(stream, foot, cap, args.machine)
    if args.app and args.app in calibrated.ACCESS and calibrated.ACCESS[args.app][1] == 0.0:
        res["hints"].append("the inputs are only read: cudaMemAdviseSetReadMostly lets the GPU keep a copy "
                            "without invalidating the CPU's")
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    what = args.app or args.trace
    print(f"{LABEL}: advice for {what} on {args.machine} (figures: {res['figures_source']}; model {sim.VERSION})")
    print(f"recommended: {res['recommended']}  (predicted {res['predicted_gain_vs_managed']:.2f}x against plain "
          f"managed memory)")
    for h in res["hints"]:
        print(f"  - {h}")
    print(calibrated.validated_text(res["validated_error"]))
    print("evidence (modelled):")
    for p, e in res["evidence"].items():
        print(f"  {p:<17} " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in e.items()))
    return 0
