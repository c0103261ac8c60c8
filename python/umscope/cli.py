"""umscope command line: info | run | bench | report | export | runs | list."""

import argparse
import json
import shlex
import signal
import sqlite3
import sys
import time

from umscope import __version__, devices, options, plans, probe, registry, scaleout, validate
from umscope import export as export_formats
from umscope.model import bounds
from umscope.errors import UsageError
from umscope.report import html as report_html
from umscope.report.summary import print_summary
from umscope.sizes import format_size
from umscope.store import Store
from umscope.model import commands as whatif
from umscope.suite import (Case, Interrupted, bus_ids_of, deferred_signals, handle_signals, interrupted_exit,
                           mark_interrupted, plan_from_json, plan_to_json, run_cases)


class _Parser(argparse.ArgumentParser):
    # Adds options the first time this parser parses (its command was given, or its help asked): the app
    # command's come from `umbench list --json`, a process that no other command should start.
    lazy_options = None

    def error(self, message):
        raise UsageError(message)

    def parse_known_args(self, args=None, namespace=None):
        if self.lazy_options:
            add, self.lazy_options = self.lazy_options, None
            add(self)
        return super().parse_known_args(args, namespace)


def _common_run_options(p):
    p.add_argument("--store", help="results store (SQLite file); default $UMSCOPE_STORE or "
                                   "~/.local/share/umscope/results.sqlite")
    p.add_argument("--report", metavar="PATH", help="where to write the HTML report")
    p.add_argument("--filter", action="append", default=[], metavar="TEXT",
                   help="run only cases whose id contains TEXT (repeatable: all must match)")
    p.add_argument("--device", help="CUDA device ordinal (default 0)")
    p.add_argument("--devices", metavar="all|0,1,...", help="run each single-GPU case on each of these GPUs")
    p.add_argument("--placement", choices=["local", "remote", "none", "sweep"],
                   help="CPU pinning and NUMA binding: the GPU's local CPUs and node (local, default), another "
                        "socket's (remote), the OS's (none), or all three (sweep)")
    p.add_argument("--reps", help=f"timed repetitions per measurement, 1-{validate.MAX_REPS} (default: the "
                                  "family's, 20 for most; yours wins over the plan's)")
    p.add_argument("--warmup", help="untimed warm-up repetitions (default: the family's, 2 for most)")
    p.add_argument("--timeout", help="seconds before a case is killed, at most "
                                     f"{validate.MAX_TIMEOUT:.0f} (default: the plan's, 10-900 s per case for bench "
                                     "and run, 1800 s for app run)")
    p.add_argument("--label", help="a name for this run")
    p.add_argument("--machine", metavar="FILE|NAME",
                   help="machine description (YAML) giving datapath peaks for the bounds; default: probe "
                        "plus the packaged description matching the GPU")
    p.add_argument("--json", action="store_true", help="print the records as JSON instead of a table")
    p.add_argument("--dry-run", action="store_true", help="list the planned cases and exit")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--isolate", action="store_true", help="one umbench process per case (default: consecutive "
                   "cases share a batch process, each still with its own timeout; see suite.py)")
    p.add_argument("--visible-gpus", metavar="all|case",
                   help="the GPUs each case's process sees: all, or case: a case that uses GPU 0 alone runs with "
                        "CUDA_VISIBLE_DEVICES narrowed to it, its records saying so (a fresh process's CUDA start "
                        "costs more with more GPUs; docs/method.md). Default: case where several GPUs are visible, "
                        "else all")
    p.add_argument("--allow-oversubscription", action="store_true",
                   help="allow managed allocations beyond free GPU memory (can hang a shared GPU)")
    p.add_argument("--allow-host-overcommit", action="store_true",
                   help="allow host allocations beyond MemAvailable")


def _bench_family_argument(p):
    """`umscope bench NAME`, its help naming every family: the planned ones and each one the runner declares."""
    p.add_argument("name", help="benchmark family: " + ", ".join(plans.families()))


def build_parser():
    p = _Parser(prog="umscope", description="Measure, trace and model CPU-GPU data movement.")
    p.add_argument("--version", action="version", version=f"umscope {__version__}")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser)
    s = sub.add_parser("info", help="capability probe of this machine")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("run", help="characterise this node with the default suite and write a report")
    _common_run_options(s)
    s.add_argument("--quick", action="store_true", help="smaller sizes (256 MiB) for a fast look")
    s.add_argument("--resume", nargs="?", const="last", metavar="RUN",
                   help="finish an interrupted run (default: the newest unfinished one)")
    s = sub.add_parser("bench", help="run one benchmark family")
    s.lazy_options = _bench_family_argument  # every family the registry knows (`umbench list --json`)
    _common_run_options(s)
    s.add_argument("--kind", action="append", metavar="SPEC",
                   help="memory kind, e.g. device, 'managed,first_touch=gpu', numa:0 (repeatable)")
    s.add_argument("--size", help="array size(s), comma-separated: 4G, 512M, 1e9 (default 1 GiB)")
    s.add_argument("--threads", help="CPU thread counts, comma-separated, each from 1 to 4x the CPUs umscope may "
                                     "use, or 'all'")
    s.add_argument("--ops", help="operations, comma-separated")
    s.add_argument("--mode", help="selftest modes, comma-separated")
    s.add_argument("--iterations", help="GPU iterations per migration case (default 100)")
    s.add_argument("--dos", help="oversub: degrees of oversubscription, comma-separated (default 0.25,0.5,0.75,0.9;"
                                 " above 1 only with --allow-oversubscription; at most 16)")
    s.add_argument("--available", help="oversub: GPU memory left free by the ballast (default 8G)")
    scaleout.add_options(s)
    s = sub.add_parser("app", help="the application suite: 'app list', 'app run NAME --mode MODE'")
    s.add_argument("action", choices=["list", "run"])
    s.add_argument("name", nargs="?", help="application (see 'umscope app list')")
    _common_run_options(s)
    from umscope import apps
    s.lazy_options = apps.add_cli_options  # every application's options, from the runner's registry
    s = sub.add_parser("profile", help="run a program unmodified and sample its memory, GPU use and power")
    s.add_argument("--period", default="100ms", help="sampling period, 1ms to 3600s (default 100ms)")
    s.add_argument("--um-trace", action="store_true", help="trace unified-memory events with CUPTI")
    s.add_argument("--uvm-events", action="store_true",
                   help="with --um-trace (implied): also read the UVM driver's own event queue: every GPU fault "
                        "entry with its batch, every replay, every migration with its cause (docs/tracing.md)")
    s.add_argument("--keep-trace", metavar="FILE",
                   help="with --um-trace (implied): keep the raw trace (libumtrace's JSON lines) in FILE, for "
                        "`umscope simulate --trace FILE` and `umscope advise --trace FILE`")
    for flag, what in (  # CUPTI's API-correlated records: each costs a launch-bound program per launch or call
            ("kernels", "every kernel (CUPTI's kernel records: the timeline's kernel lanes, kernel counts and times). "
                        "Off by default: each launch then costs more (GPT-2 generation 14-22%% slower per token on "
                        "H100/H200, docs/place.md). On with --keep-trace, whose replay needs the kernels"),
            ("copies", "every copy (CUPTI's memcpy records: bytes copied per direction, the timeline's copy lanes, "
                       "the counters' comparison). Off by default: with the allocation records, Llama and GPT-2 "
                       "generation ran 4-5%% slower per token (H200, docs/tracing.md). On with --keep-trace, and "
                       "with --counters beside a trace"),
            ("allocations", "every allocation (CUPTI's memory records: the migrations of each allocation, "
                            "simulate's and advise's buffers). Off by default, its cost as --copies'; on with "
                            "--keep-trace and --uvm-events")):
        s.add_argument(f"--{flag}", action="store_true", help=f"with --um-trace (implied): also record {what}")
    s.add_argument("--counters", nargs="?", const="sample", metavar="sample|kernel",
                   help="hardware counters: PCIe, GPU-memory and L1<->L2 bytes over time (sample: PM sampling, the "
                        "default) or per kernel (kernel: CUPTI range profiler, serialises kernels)")
    s.add_argument("--counter-set", choices=["link", "memory"], default="link",
                   help="--counters kernel: PCIe bytes (link, default) or DRAM and zero-copy L2 bytes (memory)")
    s.add_argument("--power", action="store_true", help="also sample GPU power and energy, and host energy (RAPL)")
    s.add_argument("--label", help="a label stored with the run")
    s.add_argument("--store", help="results store (SQLite)")
    s.add_argument("--report", metavar="FILE", help="where to write the HTML report")
    s.add_argument("--json", action="store_true", help="print the records as JSON on stdout after the program")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    from umscope import place
    place.add_parser(sub)
    s = sub.add_parser("report", help="write the HTML report of a run")
    s.add_argument("--store")
    s.add_argument("--run", help="run id (default: newest)")
    s.add_argument("-o", "--output", help="output path")
    s = sub.add_parser("export", help="export records as JSON lines or CSV")
    s.add_argument("--store")
    s.add_argument("--run", help="run id (default: every run)")
    s.add_argument("--format", choices=export_formats.FORMATS, default="jsonl",
                   help="jsonl, csv (with the columns that tell records apart), nvbandwidth (nvbandwidth -j's "
                        "JSON, one run), openmetrics (node_exporter textfile), caliper (json-split for Hatchet/Thicket), "
                        "perfetto (Chrome Trace Event JSON of one profile run, for ui.perfetto.dev)")
    s.add_argument("--benchmark", action="append", metavar="FAMILY",
                   help="only this family's records (repeatable; 'applications': every application record)")
    s.add_argument("-o", "--output", help="output file (default stdout)")
    s = sub.add_parser("merge", help="gather the runs of several stores (one per node) into OUT")
    s.add_argument("out", help="the store to write (created if missing)")
    s.add_argument("stores", nargs="+", help="stores to read (read-only)")
    s = sub.add_parser("compare", help="the same cases across runs and stores, with ratios, strays and published values")
    s.add_argument("runs", nargs="*", help="run ids (ID, or STORE:ID with several --store; default: every run)")
    s.add_argument("--store", action="append", help="a store to read (repeatable)")
    s.add_argument("--baseline", default="median",
                   help="'median' (of the runs, default), a run (ID, STORE:ID or label), or a baseline file "
                        "(a path ending .json, from --save-baseline)")
    s.add_argument("--threshold", help="flag figures off by more than this fraction "
                                                   "(default 0.05, or --fail-over's)")
    s.add_argument("--fail-over", metavar="FRACTION",
                   help="node gate: exit 1 when a figure is worse than its baseline (lower bandwidth, higher "
                        "latency or time) by more than FRACTION and its own spread, and print those figures")
    s.add_argument("--save-baseline", metavar="FILE.json",
                   help="write the figures compared against (the baseline run's or the median) to FILE.json")
    s.add_argument("--reference", default="all", help="published values to show: all (default), none, or a machine (GH200)")
    s.add_argument("-o", "--output", help="HTML report path (default ./umscope-compare.html; "
                                          "with --fail-over, written only when given)")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("runs", help="list the runs in the store")
    s.add_argument("--store")
    s.add_argument("--json", action="store_true")
    sub.add_parser("list", help="list benchmark families and memory kinds")
    WHATIF.update(whatif.add_parsers(sub))  # simulate, model, advise (umscope/whatif.py)
    return p


def cmd_info(args):
    fp = probe.probe()
    if args.json:
        print(json.dumps(fp, indent=2))
        return 0
    host, cpu, cuda = fp["host"], fp["cpu"], fp["cuda"]
    print(f"umscope {fp['umscope_version']} on {host['hostname']} ({host['os']}, kernel {host['kernel']})")
    print(f"CPU      {cpu['model']} ({cpu['arch']}): {cpu['logical_cpus']} logical CPUs, "
          f"{cpu['physical_cores']} cores, {cpu['sockets']} socket(s)")
    print("caches   " + ", ".join(f"L{c['level']} {c['type']} {format_size(c['bytes'])}" for c in cpu["caches"]))
    mem = host["memory"]
    print(f"memory   {format_size(mem.get('MemTotal', 0) or 1)} total, {format_size(mem.get('MemAvailable', 0) or 1)} "
          f"available; page {host['page_size']} B; THP {host['thp']} (defrag {host['thp_defrag']})")
    pages, ks = host.get("pages") or {}, host.get("kernel_settings") or {}
    print(f"pages    base {format_size(pages.get('base') or host['page_size'])}, THP "
          f"{format_size(pages['thp_pmd']) if pages.get('thp_pmd') else 'unknown'}, hugetlb "
          f"{', '.join(format_size(h) for h in pages.get('hugetlb') or []) or 'none'}; numa_balancing "
          f"{ks.get('numa_balancing')}; init_on_alloc {'unknown' if ks.get('init_on_alloc') is None else ks['init_on_alloc']} "
          f"({ks.get('init_on_alloc_source')})")
    sensors = [s for s in (fp.get("power") or {}).get("hwmon", []) if s.get("watts") is not None]
    if sensors:
        print("power    " + ", ".join(f"{s['label']} {s['watts']:.1f} W" for s in sensors) + " (hwmon, now)")
    for n in fp["numa"]:
        print(f"NUMA     node {n['id']}: {format_size(n['mem_bytes'] or 1)}, CPUs {_ranges(n['cpus'])}")
    print(f"CUDA     umbench built with CUDA: {'yes' if cuda['built_with_cuda'] else 'no'}; runtime "
          f"{probe.cuda_version_text(cuda['runtime_version'])}; driver "
          f"{cuda['driver'] or probe.cuda_version_text(cuda['driver_version'])}")
    print(f"libs     tracer {cuda.get('tracer') or 'not built'} (CUPTI {cuda.get('cupti') or 'not found'}); "
          f"cuBLAS {cuda.get('cublas') or 'not found'}")
    if not fp["gpus"]:
        print(f"GPU      none: {cuda['why_no_gpu']}")
    for g in fp["gpus"]:
        print(f"GPU {g['device']}    {g['name']} (compute capability {g['compute_capability']}), {g['sms']} SMs, "
              f"{format_size(g['total_mem'])} ({format_size(g['free_mem'] or 1)} free), L2 {format_size(g['l2_bytes'])}")
        print(f"         clocks SM {g['clock_khz'] // 1000} MHz, memory {g['mem_clock_khz'] // 1000} MHz x "
              f"{g['mem_bus_bits']} bit; PCI {g['pci_bus_id']}")
        if (g.get("c2c") or {}).get("links"):
            c = g["c2c"]
            print(f"         NVLink-C2C: {c['active_links']} of {c['links']} links active, "
                  f"{c['gbps'] if c['gbps'] else '?'} GB/s per direction (NVML)")
        link = g.get("link")
        if link:
            print(f"         host link PCIe gen {link['pcie_gen_current']} x{link['pcie_width_current']} now, "
                  f"gen {link['pcie_gen_max']} x{link['pcie_width_max']} max (NVML)")
        else:
            from umscope import nvml
            print(f"         host link: NVML not available ({nvml.why_unavailable() or 'no answer'})")
        print(f"         addressing {g['addressing']}: pageable access {int(g['pageable_memory_access'])}, "
              f"via host page tables {int(g['pageable_memory_access_uses_host_page_tables'])}, concurrent managed "
              f"{int(g['concurrent_managed_access'])}, host-native atomics {int(g['host_native_atomics'])}, "
              f"direct managed from host {int(g['direct_managed_access_from_host'])}, host pointer for registered "
              f"{int(g['can_use_host_pointer_for_registered_mem'])}, NUMA config {g['numa_config']} id {g['numa_id']}")
    from umscope.report.topology import text_lines
    for line in text_lines(fp):
        print(f"topology {line}")
    uvm = fp["uvm"]
    if uvm["readable"]:
        print("UVM      " + ", ".join(f"{k}={v}" for k, v in uvm["params"].items()))
    else:
        print(f"UVM      parameters not readable: {uvm['why']}")
    print(f"store    {fp['store']}")
    return 0


def _ranges(cpus):
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}-{c}" if c != start else f"{c}")
            start = None
    return ",".join(out)


def _options(args) -> dict:
    """The run options, each checked by its validator (also those a resumed run saved)."""
    return {"device": validate.device(args.device if args.device is not None else 0),
            "reps": None if args.reps is None else validate.reps(args.reps),
            "warmup": None if args.warmup is None else validate.warmup(args.warmup),
            "allow_oversubscription": bool(args.allow_oversubscription),
            "allow_host_overcommit": bool(args.allow_host_overcommit),
            "isolate": bool(getattr(args, "isolate", False)),
            "visible_gpus": validate.visible_gpus("all" if getattr(args, "visible_gpus", None) is None
                                                  else args.visible_gpus)}


def _check_run_options(args):
    """The options every run-creating command shares, checked before a store or a run is touched."""
    _options(args)
    validate.machine(getattr(args, "machine", None))
    if args.timeout is not None:
        validate.timeout(args.timeout)
    if args.report is not None:
        validate.output_path(args.report, "--report")
    if getattr(args, "devices", None) is not None:
        validate.devices(args.devices)
    validate.host_mem_limit()
    if args.store is not None:
        Store.check_path(args.store)


def _execute(args, kind, cases, fingerprint, store, run_id=None):
    if args.timeout is not None:
        t = validate.timeout(args.timeout)
        for c in cases:
            c.timeout = t
    for c in cases:  # a saved plan may hold a bad timeout: say so rather than crash on it
        try:
            c.timeout = validate.timeout(c.timeout)
        except UsageError as e:
            raise UsageError(f"case {c.case_id!r} has a bad timeout ({e}); give --timeout SECONDS") from None
    if args.device is not None:
        args.device = validate.device(args.device)
    fingerprint, cases = devices.select(fingerprint, args, cases)
    options = _options(args)
    if getattr(args, "visible_gpus", None) is None and len(fingerprint.get("gpus") or []) > 1:
        # Not given, several GPUs visible: a case on GPU 0 alone sees that GPU only (docs/method.md: on 4 x H100
        # three alternated A/B pairs moved no figure beyond run to run; the firsttouch family 16 s against 28 s)
        options["visible_gpus"] = "case"
    options["machine"] = validate.machine(getattr(args, "machine", None))
    options["devices"] = getattr(args, "devices", None)
    if getattr(args, "placement", None) not in (None, "sweep"):
        options["placement"] = args.placement
    if args.report is not None:
        validate.output_path(args.report, "--report")
    desc = bounds.describe(fingerprint, options["machine"])  # a bad --machine fails before anything runs
    if args.dry_run:  # lists the plan: no store is opened or created
        for c in cases:
            print(validate.printable(c.case_id))
        return 0
    if store is None:
        store = Store(args.store)  # a damaged or unwritable store fails before anything runs
    try:  # a signal between the run's creation and run_cases' own handling leaves it interrupted, not running
        if run_id is None:
            command = "umscope " + " ".join(shlex.quote(a) for a in sys.argv[1:])
            with deferred_signals():  # the run's id is known once the run exists
                run_id = store.create_run(kind, command, plan_to_json(cases), options, fingerprint, args.label)
        if not fingerprint.get("gpus"):
            why = (fingerprint.get("cuda") or {}).get("why_no_gpu")
            sys.stderr.write(f"no GPU: {why}; GPU cases will be recorded as skipped\n")
        sys.stderr.write(f"run {run_id}: {len(cases)} cases into {store.path}\n")
        bus_ids = bus_ids_of(fingerprint)
    except KeyboardInterrupt as e:
        if run_id is not None:
            mark_interrupted(store, run_id, getattr(e, "signum", signal.SIGINT))
        raise
    status = run_cases(store, run_id, cases, options, progress=not args.no_progress,
                       annotate=lambda recs: bounds.annotate(recs, fingerprint, desc), bus_ids=bus_ids)
    try:
        records = store.records(run_id)
        if args.json:
            print(json.dumps(records, indent=1))
        else:
            print_summary(records, store.cases(run_id), representative=(kind == "run"))
        report_html.save_report(store, run_id, args.report)
    except KeyboardInterrupt:
        if status == "complete":  # every case is stored: what the signal cut short is this summary or report
            try:
                sys.stderr.write(f"\nrun {run_id} is complete (every case stored); the signal came while its summary "
                                 f"or report was written: `umscope report --store {shlex.quote(str(store.path))} "
                                 f"--run {run_id}` writes the report\n")
            except (OSError, ValueError):
                pass
        raise
    if status != "complete":
        return interrupted_exit(status)
    return exit_code(store.cases(run_id))


def exit_code(cases) -> int:
    """0 every case measured (or skipped: the machine lacks what it needs), 1 a case failed or timed out,
    2 a case was refused by a guard (nothing measured for it)."""
    statuses = {c["status"] for c in cases}
    if statuses & {"failed", "timeout"}:
        return 1
    return 2 if "refused" in statuses else 0


def cmd_run(args):
    if args.resume is not None:
        run_id = None if args.resume == "last" else validate.run_id(args.resume, "--resume")
        store = Store(args.store)
        run_id = store.last_unfinished_run() if run_id is None else run_id
        if run_id is None:
            raise UsageError("no interrupted run to resume")
        run = store.run(run_id)
        if run["status"] == "complete":
            raise UsageError(f"run {run_id} is complete: nothing to resume")
        try:
            cases = plan_from_json(run["plan"] or [])
        except (KeyError, TypeError, AttributeError):
            raise UsageError(f"run {run_id}'s saved plan is damaged; it cannot be resumed") from None
        # The saved options, unless given again now (a bad saved value can be replaced that way).
        opts = run["options"] if isinstance(run["options"], dict) else {}
        for k, v in opts.items():
            if k == "interrupted":  # what ended the run before: kept for its report, not an option
                continue
            if k in ("device", "reps", "warmup", "machine", "visible_gpus") and getattr(args, k, None) is not None:
                continue
            if k in ("allow_oversubscription", "allow_host_overcommit"):
                v = bool(v) or bool(getattr(args, k, False))
            setattr(args, k, v)
        try:
            _options(args)
        except UsageError as e:
            raise UsageError(f"run {run_id} was saved with a bad option ({e}); give that option again to "
                             "resume it") from None
        return _execute(args, run["kind"], cases, run["fingerprint"], store, run_id)
    _check_run_options(args)
    fp = probe.probe()
    cases = plans.apply_filter(plans.default_plan(fp, quick=args.quick), args.filter)
    return _execute(args, "run", cases, fp, None)


def cmd_bench(args):
    opts = options.bench_options(args.name, kinds=args.kind, sizes=args.size, threads=args.threads, ops=args.ops,
                                     mode=args.mode, iterations=args.iterations, dos=args.dos,
                                     available=args.available, allow_oversubscription=args.allow_oversubscription)
    _check_run_options(args)
    fp = probe.probe()
    cases = plans.bench_plan(args.name, fp, kinds=args.kind, **opts, scale=scaleout.options(args))
    cases = plans.apply_filter(cases, args.filter)
    return _execute(args, f"bench {args.name}", cases, fp, None)


def cmd_profile(args):
    from umscope import profile as profiler
    period = validate.period(args.period)
    if args.report is not None:
        validate.output_path(args.report, "--report")
    if args.store is not None:
        Store.check_path(args.store)
    if args.keep_trace is not None:
        validate.output_path(args.keep_trace, "--keep-trace")
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("profile needs a command after --, e.g. umscope profile -- ./app args")
    fp = probe.probe()
    gpus = [g["pci_bus_id"] for g in fp.get("gpus", [])]
    numa = len([n for n in fp.get("numa", []) if n.get("mem_bytes")]) or 1
    counters = None
    if args.counters is not None:
        from umscope.profile import hwcounters
        try:
            counters = {"modes": hwcounters.parse_modes(args.counters), "set": args.counter_set}
        except ValueError as err:
            raise UsageError(str(err)) from None
    store = Store(args.store)  # an unwritable store fails before the program runs
    kept = args.keep_trace is not None  # simulate and advise replay kernels on allocations
    args.kernels = args.kernels or kept
    args.allocations = args.allocations or kept or args.uvm_events  # the driver's events, put on allocations
    args.um_trace = args.um_trace or args.uvm_events or args.kernels or args.copies or args.allocations
    args.copies = args.copies or kept or (args.um_trace and counters is not None)  # the link's other traffic
    status, records, notes = profiler.profile(cmd, period, args.power, gpus, numa, args.um_trace, counters,
                                              uvm_events=args.uvm_events, keep_trace=args.keep_trace,
                                              kernels=args.kernels, copies=args.copies, allocations=args.allocations)
    command = "umscope " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    run_id = store.create_run("profile", command, [], {"period": period, "power": args.power,
                                                      "um_trace": args.um_trace, "uvm_events": args.uvm_events,
                                                      "kernels": args.kernels, "copies": args.copies,
                                                      "allocations": args.allocations, "counters": counters and {
                                                          "modes": list(counters["modes"]), "set": counters["set"]}},
                              fp, args.label)
    run = next(r for r in records if r["op"] == "run")
    case = Case("profile", None, {"command": " ".join(cmd)})
    ok = status == 0
    reason = "" if ok else (f"the program was killed by {run['signal']}" if run.get("signal")
                            else f"the program exited with status {status}")
    store.add_case_result(run_id, case, "ok" if ok else "failed", reason, time.time() - run["median"],
                          run["median"], records)
    store.finish_run(run_id, "complete")
    profiler.print_summary(records)
    if args.json:
        print(json.dumps(records))
    sys.stderr.write(f"profile stored as run {run_id} in {store.path}\n")
    report_html.save_report(store, run_id, args.report)
    return status


def cmd_app(args):
    from umscope import apps
    if args.action == "list":
        for name, app in apps.APPS.items():
            print(f"{name:<11} {app.help}\n{'':<11} options: --{', --'.join(app.takes)}"
              + (f"; modes: {', '.join(app.modes)}" if app.modes != apps.MODES else ""))
        print(f"modes: {', '.join(apps.MODES)}")
        for m in registry.load()["modes"]:
            print(f"  {m['name']:<17} {m['help']}")
        return 0
    if not args.name:
        raise UsageError("app run needs an application name (see 'umscope app list')")
    if args.name not in apps.APPS:
        raise UsageError(f"unknown application {args.name!r} (known: {', '.join(apps.APPS)})")
    opts = {k: getattr(args, k.replace("-", "_"), None) for k in sorted(apps.cli_options())}
    modes = args.mode or ["explicit"]
    if modes == ["all"]:
        modes = list(apps.modes_of(args.name))
    modes = list(dict.fromkeys(modes))  # a repeated mode would be the same case twice
    opts = options.app_options(args.name, opts, [m for m in modes if m in apps.modes_of(args.name)])
    cases = apps.app_cases(args.name, modes, opts)
    _check_run_options(args)
    fp = probe.probe()
    cases = plans.apply_filter(cases, args.filter)
    return _execute(args, f"app {args.name}", cases, fp, None)


def cmd_report(args):
    run_id = validate.run_id(args.run) if args.run is not None else None
    if args.output is not None:
        validate.output_path(args.output, "-o")
    store = Store(args.store, readonly=True)
    try:
        path = report_html.write_report(store, run_id, args.output)
    except OSError as e:
        raise UsageError(f"cannot write the report: {e.strerror or e}") from None
    except (TypeError, KeyError, ValueError, AttributeError) as e:  # rows no umscope wrote (a damaged or edited store)
        raise UsageError(f"run {run_id or 'newest'} of {store.path} holds rows this report cannot draw "
                         f"({type(e).__name__}: {str(e)[:100]}); `umscope export` gives what it holds") from None
    print(path)
    return 0


def cmd_export(args):
    run_id = validate.run_id(args.run) if args.run is not None else None
    if args.output is not None:
        validate.output_path(args.output, "-o")
    store = Store(args.store, readonly=True)
    if run_id is not None:
        store.run(run_id)  # a clear error for an unknown run
    records, damage = store.salvage_records(run_id)
    if damage:  # a damaged store: every record still readable, as JSON lines, and one line saying what was lost
        records = [r for r in records if export_formats.in_families(r, args.benchmark)]
        text = store.export("jsonl", run_id, records) if args.format == "jsonl" else ""
        if args.format != "jsonl":
            damage += "; `--format jsonl` writes every readable record"
    else:
        text = export_formats.export(store, args.format, run_id, args.benchmark)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise UsageError(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    if damage:
        raise UsageError(damage)
    return 0


def cmd_merge(args):
    """0 where every run of every store was read; 1 where a store or a run could not be (what was readable is
    merged all the same, and each input's line on stderr says what was skipped and why)."""
    from umscope.merge import merge
    t = merge(args.out, args.stores)
    print(f"merged {t['runs']} run(s), {t['records']} record(s) from {t['stores']} store(s) into {args.out}"
          + (f"; {t['replaced']} run(s) replaced by their newer state" if t["replaced"] else "")
          + (f"; {t['skipped_runs']} run(s) already there" if t["skipped_runs"] else "")
          + (f"; {t['unreadable_runs']} damaged run(s) and {t['refused']} unreadable store(s) skipped"
             if t["unreadable_runs"] or t["refused"] else ""))
    return 1 if t["unreadable_runs"] or t["refused"] else 0


def cmd_compare(args):
    from umscope import compare
    return compare.run_command(args)


def cmd_runs(args):
    rows = Store(args.store, readonly=True).runs()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    p = validate.printable  # labels and commands are the user's text: no escape sequences reach the terminal
    for r in rows:
        print(f"{r['id']:>4}  {p(r['status']):<11} {p(r['kind']):<18} {p(r['gpu'] or 'no GPU'):<28} "
              f"{p(r['command'])}" + (f"  [{p(r['label'])}]" if r.get("label") else ""))
    return 0


def cmd_list(_args):
    print("benchmark families (umscope bench NAME):")
    for name, help_ in plans.families().items():
        print(f"  {name:<12} {help_}")
    print("memory kinds (--kind NAME[:N][,policy=value...]):")
    for name, k in registry.kinds().items():
        print(f"  {name + (':N' if k['takes_arg'] else ''):<12} {k['help']}")
        print(f"  {'':<14}pages live: {k['lives']}; reachable by: {k['reachable_by']}")
        for p in k["policies"]:
            print(f"  {'':<14}{p['key']}={'|'.join(p['values'])}: {p['help']}"
                  + (f" [default {p['default']}]" if p.get("default") else ""))
    print("applications (umscope app run NAME; umscope app list for their options):")
    for name, b in registry.applications().items():
        print(f"  {name:<12} {b['help']}")
    print("memory modes of the applications (--mode):")
    for m in registry.load()["modes"]:
        print(f"  {m['name']:<17} {m['help']}")
    return 0


def cmd_place(args):
    from umscope import place
    return place.cmd_place(args)


COMMANDS = {"info": cmd_info, "run": cmd_run, "bench": cmd_bench, "app": cmd_app, "profile": cmd_profile, "report": cmd_report,
            "export": cmd_export, "runs": cmd_runs, "list": cmd_list, "merge": cmd_merge, "compare": cmd_compare,
            "place": cmd_place}
WHATIF = {}


def main(argv=None) -> int:
    """Exit codes (README, "Exit codes"): 0 every case measured, 1 a case failed or timed out, 2 a usage
    error or a refusal (nothing measured), 129/130/143 interrupted by SIGHUP/SIGINT/SIGTERM."""
    parser = build_parser()
    with handle_signals():
        try:
            args = parser.parse_args(argv)
            if not args.cmd:
                parser.print_help()
                return 2
            return {**COMMANDS, **WHATIF}[args.cmd](args)
        except UsageError as e:
            sys.stderr.write(f"umscope: error: {validate.printable(e)}\n")
            return 2
        except sqlite3.DatabaseError as e:
            sys.stderr.write(f"umscope: error: the store failed: {e}\n")
            return 2
        except KeyboardInterrupt as e:
            try:
                sys.stderr.write("umscope: interrupted\n")
            except OSError:
                pass
            return e.exit_code if isinstance(e, Interrupted) else 130
        except BrokenPipeError:
            return 0
