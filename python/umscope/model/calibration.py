"""The calibration rule of the simulator: umsim's per-entry figures measured on the calibration programs'
fault events (entry_figures; none of them a validated case), the choice among umsim's mechanisms on those
programs alone (choose_variant), the sensitivity of the chosen model (threshold_sensitivity, own_figures) and
the simulator's validated error written to model/validated.json (validated_record, write_validated)."""
import itertools
import json
import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from umscope.model import calibrated, events, validation
from umscope.model.validation import SETS, errs_of, family, summary_params

def weights(hists):
    """umsim's weight list (1, 2, ..., 8 and more) of summed event histograms ({'1': n, ..., '>8': n})."""
    tot = [0] * 8
    for h in hists:
        for k, n in (h or {}).items():
            i = min(8, int(k.lstrip(">")) + (1 if k.startswith(">") else 0)) - 1
            tot[i] += n
    return ",".join(str(x) for x in tot) if sum(tot) else None


def entry_figures(calib):
    """umsim's per-entry figures measured from the driver's fault events of the calibration programs
    (--set calib and calib2, validation.CALIB_SETS; none of them a validated case), per kernel family: the faulted pages a uTLB holds
    (pages per uTLB per batch) and the instances it writes per entry, from the programs whose batches stay
    below the batch size (fewer than 10% full: there a batch holds every uTLB's entries); the delay from a
    replay to the next fetch (the 95th percentile of the GPU write times after the previous replay: the
    burst the replay causes); whether another uTLB's entry is merged (more than 5% of the entries whose
    pages several uTLBs fault). calib: [(case, counted)]. Returns the figures and where each came from."""
    out, src = {}, {}
    evs = [(c, n["events"]) for c, n in calib if (n.get("events") or {}).get("ok") and n["events"].get("entries")]
    for fam in ("read", "write", "truth"):
        fe = [(c, e) for c, e in evs if family(c) == fam]
        low = [(c, e) for c, e in fe if e["batches_at_limit"] < 0.1 * e["batches"]] or fe
        if not low:
            continue
        out[f"utlb_fault_weights_{fam}"] = weights([e["per_utlb_batch"]["pages"] for _, e in low])
        out[f"entry_instances_{fam}"] = weights([e["instances_per_entry"] for _, e in low])
        src[fam] = [c["label"] for c, _ in low]
    p95 = sorted(e["written_after_previous_replay_us"]["p95"] for _, e in evs
                 if (e.get("written_after_previous_replay_us") or {}).get("p95") is not None)
    if p95:
        out["replay_fetch_us"] = p95[len(p95) // 2]
        # the same burst bounds the GPU side's: a uTLB's misses after it wait for the next replay (stall)
        out["fault_burst_us"] = out["replay_fetch_us"]
    shared = [e for c, e in evs if family(c) == "truth"]
    if shared:
        across = sum(e.get("entries_across_utlbs", 0) for e in shared) / sum(e["entries"] for e in shared)
        out["cross_utlb_merge"] = "on" if across > 0.05 else "off"
        out["cross_utlb_share"] = round(across, 4)
    # the GPU's fault-buffer write spacing: the median over the programs of each one's median burst spacing
    ws = sorted(e["burst_write_ns"]["p50"] for _, e in evs if (e.get("burst_write_ns") or {}).get("p50"))
    if ws:
        out["write_ns"] = ws[len(ws) // 2]
    # structural choices, no figure: entries written at one instant enter the buffer spread over the SMs; an
    # SM's blocks take turns in an arbitrary order; an SM misses every page of an unrolled step's first chunk
    # before those of its next chunk
    out["interleave"] = "on"
    out["block_order"] = "shuffled"
    # the SMs whose blocks share pages take their blocks in one order, drawn per grid step and group (umsim
    # --block-order groups; calibration.TRIED's block-groups, structural, no figure)
    out["block_order_groups"] = "groups"
    out["page_order"] = "chunks"
    # a uTLB whose faulted pages are all mapped goes on before the batch's replay, as each VA block's service ends
    out["release"] = "blocks"
    # the instances of the entries uTLBs write at one instant enter the buffer round by round (umsim
    # --instance-order spread; structural, no figure: the GPU ns between a uTLB's instances on one page grow with
    # the uTLBs writing at once, docs/simulator.md session 19)
    out["instance_order"] = "spread"
    # the same on the read kernels alone (calibration.TRIED's spread-read)
    out["instance_order_read"] = "spread"
    # the gap between a uTLB's consecutive instances of one page per uTLB faulting at once (umsim --instance-gap-ns),
    # per kernel family: the median over the family's calibration programs with an entry table (all of them: the gap
    # is measured against the concurrency, which is what the low ones lack)
    tables = [(c, lines) for c, lines in ((c, entry_table_lines(n)) for c, n in calib) if lines is not None]
    for fam in ("read", "write", "truth"):
        g = [x["ns_per_utlb"] for x in (events.instance_gaps(t) for c, t in tables if family(c) == fam) if x]
        if g:
            out[f"instance_gap_ns_{fam}"] = round(statistics.median(g), 3)
    # a uTLB the replay released resumes at once (umsim --resume-us): the median over the calibration programs with an
    # entry table of each one's median GPU time from a batch's replay to the first new-page entry of one of its uTLBs
    rd = [x["us_p50"] for x in (events.resume_delays(t) for _, t in tables) if x]
    if rd:
        out["resume_us"] = round(statistics.median(rd), 3)
    # the uTLBs faulting at once, as the figure's denominator counts them: those with entries in the buffer (the
    # driver's batch shows the uTLBs whose entries it fetched; structural, no figure)
    out["instance_gap_by"] = "buffer"
    out["entry_figures_from"] = src
    return out


def entry_table_lines(counted):
    """A calibration program's entry table as events.table_lines() reads it, read once for every figure taken from it
    (None where it kept none)."""
    table = counted.get("entry_table")
    return events.table_lines(table) if table and os.path.exists(table) else None


# The mechanisms umsim-4 and later can add to umsim-3's replay, each with its figures measured by entry_figures()
FEATURES = {
    "pages": ("utlb_fault_weights_read", "utlb_fault_weights_write", "utlb_fault_weights_truth"),
    "instances": ("entry_instances_read", "entry_instances_write", "entry_instances_truth"),
    "cross-merge": ("cross_utlb_merge",),
    "replay-fetch": ("replay_fetch_us",),
    "interleave": ("interleave",),
    "write-rate": ("write_ns",),
    # umsim-7 (session 22): the SMs whose blocks share pages (their round-r blocks on one page) take their blocks in
    # one order, drawn per grid step and group (umsim --block-order groups), in place of umsim-5's block-order (every
    # SM's order drawn alone): the rule's search over both (2048 combinations) chose it in block-order's place
    "block-groups": ("block_order_groups",),
    "page-order": ("page_order",),
    "block-release": ("release",),
    # a candidate of session 18, which the rule has not chosen: the SMs' warps stall at a fault until the replay that
    # services it and fault in a burst right after each replay (umsim --fault-burst-us)
    "stall": ("fault_burst_us",),
    # umsim-8 (session 25): a uTLB the replay released resumes resume_us after it (umsim --resume-us; measured
    # 0.032 us on the calibration programs' entry tables), not replay_fetch_us, so its misses join the replay's burst
    # and the fetch leaves the burst's tail to the next batch (the many-block reads' stale entries on pages of the
    # granules the batch migrated: 18-34% of a granule's faulted pages on 84-792 blocks, 0-1% on 6-20; branch
    # fault39e, session 24)
    "resume": ("resume_us",),
    # umsim-8 (session 25): the read kernels' entries of one instant enter the buffer round by round, a page's later
    # instances after every uTLB's first (umsim --instance-order spread for them; session 20). The rule's search over
    # FEATURES with these two as the eleventh and twelfth mechanisms (4096 combinations, session 24) chose umsim-7's
    # six with both: inside the band on 7 of 17 calibration programs, largest |error| 31.5% (umsim-7: 7 of 17,
    # 59.2%); held out 23 of 69 inside, median |error| 14.6% (umsim-7: 18 of 69, 16.5%)
    "spread-read": ("instance_order_read",),
}

# Mechanisms measured on the calibration programs and left out of the rule's search, each with why; usable by name
# where mechanisms are named by hand (bench/fault_decompose.py --features).
TRIED = {
    # session 19: entries written at one instant enter the buffer round by round, a page's later instances after
    # every uTLB's first (umsim --instance-order spread). All 1024 combinations with it, searched on the calibration
    # programs' bands: at best inside on 7 of 17 with a larger worst error (88.5%) than umsim-6's choice (7 of 17,
    # 64.8%), which the rule therefore keeps (docs/simulator.md); kept out so the search stays at 1024 combinations.
    "spread": ("instance_order",),
    # session 20: a uTLB's later instances of a page trail its first by instance_gap_ns per uTLB faulting at once
    # (umsim --instance-gap-ns, the uTLBs with entries in the buffer), on the read kernels only (their figure alone;
    # the write and um-truth kernels' entries keep their instances side by side). With umsim-6's mechanisms: inside
    # the band on 7 of 17 calibration programs, largest |error| 64.8% (umsim-6's own: 7 of 17, 64.8%: the rule keeps
    # umsim-6, fewer mechanisms); the read on 160 blocks -49.3% -> +8.6%; held out 22 of 69, median 13.2%.
    "trail-read": ("instance_gap_ns_read", "instance_gap_by"),
    # umsim-5's block-order: every SM draws its order of the rounds alone (umsim --block-order shuffled); in FEATURES
    # until session 22. The rule's search over FEATURES with block-groups as an eleventh mechanism (2048
    # combinations) chose block-groups in its place (pages, instances, cross-merge, replay-fetch, write-rate,
    # block-groups: 7 of 17, largest |error| 59.2%, against umsim-6's six with block-order: 7 of 17, 64.8%), so
    # umsim-7 searches block-groups in its place (docs/simulator.md).
    "block-order": ("block_order",),
}


def choose_variant(meta, counts, device, ef, tmp, runs=None, more=()):
    """Every combination of FEATURES on the calibration programs: the one that meets the target there most often
    (the most programs within +-10% of the driver's count, or inside their band: runs below), then misses it
    least (the smallest largest |error|),
    then has the fewest features, then comes first in FEATURES' order (min() keeps the first of equals) is the
    model used for every validated case. Until session 5 the rule was the smallest median |error|, which chose a
    model missing a calibration program by 64%: its choice is returned too ('by_median'), for the comparison.
    runs: every kept run of the calibration programs ([(meta, got)] as validation.second_run reads them, the
    first among them); with validation.BAND_RUNS of them or more, a program counts as met where the variant's
    count falls inside its own run-to-run band (validation.band_rows), as the validated target counts it, not
    within +-10% of one run ('criterion': 'band' or '+-10%').
    more: the other calibration sets ([(meta, counts, runs)], validation.CALIB_SETS): the choice counts the programs
    of every set, each against its own runs (by band only where every set has validation.BAND_RUNS runs).
    Returns {'chosen', 'figures', 'table': [(features, errors by program)], 'by_median', 'measured', 'criterion'}."""
    names = list(FEATURES)
    sets = [(meta, counts, runs)] + list(more)
    by_band = all(r and len(r) >= validation.BAND_RUNS for _, _, r in sets)
    combos = [c for r in range(len(names) + 1) for c in itertools.combinations(names, r)]

    def one(i, combo):  # umsim runs as a subprocess: the combinations run side by side, one folder each
        fig = {k: ef[k] for f in combo for k in FEATURES[f] if ef.get(k) is not None}
        sub = Path(tmp) / f"v{i}"
        sub.mkdir(exist_ok=True)
        per = [(validation.compare(m, c, dict(device, **fig), sub, quiet=True), r) for m, c, r in sets]
        rows = [x for rs, _ in per for x in rs]
        errs = errs_of(rows, "timed")
        med = sorted(map(abs, errs))[len(errs) // 2] if errs else float("inf")
        within, worst = sum(1 for e in errs if abs(e) <= 0.10), max(map(abs, errs), default=float("inf"))
        if by_band:  # met inside the band; the largest |error| against the driver's median
            brows = [b for rs, r in per for b in validation.band_rows(rs, r) if b["status"] in ("met", "missed")]
            within = sum(1 for b in brows if b["status"] == "met")
            worst = max((abs(b["error"]) for b in brows), default=float("inf"))
        return {"features": list(combo), "figures": fig, "errors": errs, "median": med,
                "within": within, "worst": worst,
                "labels": [r["label"] for r in rows]}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as ex:
        table = list(ex.map(one, range(len(combos)), combos))  # in combos' order, whatever finishes first
    best = min(table, key=lambda t: (-t["within"], round(t["worst"], 4), len(t["features"])))
    med = min(table, key=lambda t: (round(t["median"], 4), len(t["features"])))
    return {"chosen": best["features"], "figures": best["figures"], "table": table, "measured": ef,
            "by_median": {"chosen": med["features"], "figures": med["figures"]},
            "criterion": "band" if by_band else "+-10%"}


# The instances per entry the sensitivity replays (weights for 1, 2, 3, 4 instances): every entry two; one or
# three in ten single; the read kernels' mix on 132 blocks (the driver's events, main case 5, rounded); one in
# ten with three or four instead of two.
SENSITIVITY_INSTANCES = {"all 2": "0,1", "10% 1, 90% 2": "1,9", "30% 1, 70% 2": "3,7",
                         "35% 1, 47% 2, 7% 3, 11% 4": "35,47,7,11", "90% 2, 5% 3, 5% 4": "0,18,1,1"}


def threshold_sensitivity(meta, counts, device, tmp, case=5, ratios=(0, 50, 100)):
    """The chosen model on one program of the main set (reads on 132 blocks), its read instances per entry
    replaced by each of SENSITIVITY_INSTANCES, under the driver's update-PUT ratio and two others (0: every batch
    with a duplicate flushed whole; 100: none). Returns {ratio: {label: entries}} and the driver's count."""
    if case not in counts:
        return None
    out = {}
    for ratio in ratios:
        m = json.loads(json.dumps(meta))
        params = ((m.setdefault("uvm", {})).setdefault("params", {}))
        m["uvm"]["readable"] = True
        params["uvm_perf_fault_replay_update_put_ratio"] = str(ratio)
        row = {}
        for label, w in SENSITIVITY_INSTANCES.items():
            rows = validation.compare(m, {case: counts[case]}, dict(device, entry_instances_read=w), tmp, quiet=True)
            row[label] = (rows[0].get("timed") or {}).get("entries")
        out[ratio] = row
    return {"case": case, "driver": (counts[case].get("driver") or {}).get("gpu_faults"), "entries": out,
            "ratio": summary_params(meta)["update_put_ratio"]}


def own_figures(runs, device, tmp):
    """Not a prediction: the chosen model on each validated program with the pages a uTLB holds and the instances
    per entry taken from that program's own fault events (the figures the calibration programs give every
    program of a kernel family), with umsim's two release rules. runs: [(meta, counts)]. Returns {release:
    [errors]}."""
    out = {}
    for release in ("replay", "blocks"):
        errs = []
        for meta, cnts in runs:
            cases = SETS[meta.get("set", "main")][0]
            for n, c in cnts.items():
                e = c.get("events") or {}
                if not e.get("instances_per_entry") or not e.get("per_utlb_batch"):
                    continue
                fam = family(cases[n])
                dev = dict(device, release=release)
                dev[f"entry_instances_{fam}"] = weights([e["instances_per_entry"]])
                dev[f"utlb_fault_weights_{fam}"] = weights([e["per_utlb_batch"]["pages"]])
                errs += errs_of(validation.compare(meta, {n: c}, dev, tmp, quiet=True), "timed")
        out[release] = errs
    return out


def validated_record(tables, meta, version, mechanisms=None) -> dict:
    """The simulator's validated error as model/validated.json holds it (key "umsim"): the first table's
    bytes against the truth, the driver and CUPTI (largest |error|), and per validated set the timed entries'
    largest |error| against the driver's GPU faults and how many fall within +-10% (the calibration programs,
    on which the model was chosen, are no validation), and the mechanisms the rule chose (choose_variant's
    'chosen', the timed replay's; bench/fault_decompose.py's default). tables: [(set name, meta, rows of compare())]."""
    ok = lambda x: x == x and abs(x) <= 0.10  # noqa: E731
    rows = tables[0][2]

    def worst(key):
        e = [abs(validation.err(r["sim_htod"], r[key] if key != "driver" else (r["driver"] or {}).get("htod", 0)))
             for r in rows]
        e = [x for x in e if x == x]
        return round(max(e), 4) if e else None
    rec = {"model_version": version, "machine": meta["gpu"], "commit": meta.get("commit"),
           "when": meta.get("when"), "cases": len(rows),
           "htod_bytes_max_error_vs_truth": worst("truth_htod"), "htod_bytes_max_error_vs_driver": worst("driver"),
           "htod_bytes_max_error_vs_cupti": worst("cupti_htod")}
    if mechanisms is not None:
        rec["mechanisms"] = list(mechanisms)
    for tname, _, trows in tables:
        e = [x for x in errs_of(trows, "timed") if x == x]
        if e and tname != "calibration":
            rec[f"gpu_fault_entries_max_error_vs_driver_{tname}"] = round(max(map(abs, e)), 4)
            rec[f"gpu_fault_entries_within_10pct_{tname}"] = f"{sum(map(ok, e))} of {len(e)}"
    return rec


def write_validated(tables, meta, version, path=None, mechanisms=None) -> dict:
    """validated_record() stored under "umsim" in model/validated.json, or `path` (the other entries kept)."""
    rec = validated_record(tables, meta, version, mechanisms)
    calibrated.write_validated("umsim", rec, path)
    return rec
