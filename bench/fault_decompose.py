#!/usr/bin/env python3
"""Where umsim's GPU fault count departs from the UVM driver's, on the calibration programs only (issue 39).

Reads the kept calibration runs (data/sim-traces/calib, calib2, calib3 where kept: their per-entry tables of the driver's fault events)
and replays each program through the timed model exactly as bench/sim_validate.py does (the device figures from
every kept set's counts, the per-entry figures from the calibration programs' events, the mechanisms the rule
chose, as model/validated.json's "umsim" entry names them; --features to change them), with its entry log. The
count of both is split, over the address range the driver's entry table covers (its first instances), into
    entries = faulted VA blocks x faulted 64 KiB granules per VA block x distinct pages per faulted granule
              x entries per distinct page,
and the batches are described the same way (per batch: instances, entries, uTLBs, pages, granules). No validated
program is read: the figures come from calibration programs alone. Writes docs/simulator-fault-count.md (--out).
CPU only; about a minute."""
import argparse
import math
import statistics as st
import sys
import tempfile
import json
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import _commit  # noqa: E402
from umscope.model import calibration, validation  # noqa: E402
from umscope.model import events as ev  # noqa: E402
from umscope.model.validation import CALIB_SETS, SETS, counted_all, device_figures  # noqa: E402

VALIDATED_DIRS = ("main", "extra", "fresh", "fresh2", "fresh3", "fresh4")  # their counts only: device_figures' input
GRANULE = 16  # pages of the driver's fault granule (a 64 KiB big page) and umsim's --granule
VA_BLOCK = 512


def entries_of(lines, limit):
    """[(batch, page, uTLB, instances)] of the merged entries on pages below `limit`."""
    out = []
    for (_, b, _), grp in ev._merged([e for e in lines if e.get("k") == "uvm_fault"]).items():
        pg = grp[0]["a"] // ev.PAGE
        if pg < limit:
            out.append((b, pg, (grp[0].get("gpc"), grp[0].get("cl")), len(grp)))
    return out


def decompose(ents):
    pages = {p for _, p, _, _ in ents}
    grans = {p // GRANULE for p in pages}
    blocks = {p // VA_BLOCK for p in pages}
    return {"entries": len(ents), "blocks": len(blocks), "granules_per_block": len(grans) / max(1, len(blocks)),
            "pages_per_granule": len(pages) / max(1, len(grans)), "entries_per_page": len(ents) / max(1, len(pages))}


def per_batch(ents):
    by = defaultdict(list)
    for b, p, u, n in ents:
        by[b].append((p, u, n))
    bs = sorted(by)[1:-1]  # the first (no replay before it) and the last (a table may cut it) left out
    med = lambda fn: st.median(fn(by[b]) for b in bs) if bs else float("nan")  # noqa: E731
    return {"instances": med(lambda l: sum(n for _, _, n in l)), "entries": med(len),
            "utlbs": med(lambda l: len({u for _, u, _ in l})), "pages": med(lambda l: len({p for p, _, _ in l})),
            "granules": med(lambda l: len({p // GRANULE for p, _, _ in l}))}


def chosen():
    """The mechanisms bench/sim_validate.py's rule chose at the last validation (the "umsim" entry of the
    model/validated.json it writes, _commit.validated_path(): "mechanisms"), comma-separated; None where that entry
    names none."""
    try:
        m = json.loads(Path(_commit.validated_path()).read_text()).get("umsim", {}).get("mechanisms")
    except (OSError, ValueError):
        m = None
    return None if m is None else ",".join(m)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=str(ROOT / "data" / "sim-traces"))
    ap.add_argument("--features", default=chosen(),
                    help="umsim's mechanisms (calibration.FEATURES or TRIED; default the validated model's, as "
                    "model/validated.json names them)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "simulator-fault-count.md"))
    a = ap.parse_args()
    named = {**calibration.FEATURES, **calibration.TRIED}
    if a.features is None:
        ap.error("model/validated.json names no validated mechanisms (bench/sim_validate.py writes them): "
                 "give --features")
    feats = [f for f in a.features.split(",") if f]
    bad = [f for f in feats if f not in named]
    if bad:
        ap.error(f"unknown mechanism {','.join(bad)} (calibration.FEATURES or TRIED: {','.join(named)})")
    t0 = time.time()
    D = Path(a.traces)
    csets = [s for s in CALIB_SETS if (D / s / "meta.json").exists()]  # the calibration sets kept so far
    metas = {s: json.loads((D / s / "meta.json").read_text()) for s in csets}
    counts = {s: counted_all(str(D / s), metas[s]) for s in csets}
    others = [c for d in VALIDATED_DIRS if (D / d / "meta.json").exists()
              for c in counted_all(str(D / d), json.loads((D / d / "meta.json").read_text())).values()]
    device = device_figures(others + [c for s in csets for c in counts[s].values()])
    ef = calibration.entry_figures([(SETS[metas[s]["set"]][0][n], c) for s in csets for n, c in counts[s].items()])
    dev = dict(device, **{k: ef[k] for f in feats for k in named[f] if ef.get(k) is not None})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in csets:
            for r in validation.compare(metas[s], counts[s], dev, tmp, quiet=False):
                dl = ev.table_lines(r["entry_table"])
                limit = int(0.9 * max(e["a"] // ev.PAGE for e in dl if e["k"] == "uvm_fault"))
                de, me = entries_of(dl, limit), entries_of(ev.model_lines(r["entry_log"]), limit)
                r["_dec"] = (decompose(de), decompose(me), limit)
                r["_pb"] = (per_batch(de), per_batch(me))
                rows.append((s, r))  # compare's own timeline: the driver's and the model's at replay_fetch_us
    lines = ["# Where the simulator's GPU fault count departs from the driver's (generated by bench/fault_decompose.py)",
             "", f"The calibration programs only (sets {', '.join(csets)}; no validated program is read), each "
             f"replayed by umsim {validation.sim.VERSION} with the mechanisms {', '.join(feats)} and the figures "
             "bench/sim_validate.py gives them, against the driver's fault events of the same run (its per-entry "
             f"table). Written by `python3 bench/fault_decompose.py` ({time.time() - t0:.0f} s).", "",
             "## The count, split", "",
             "Over the pages below the table's range (90% of the highest page the driver's table reaches: the table "
             "holds a run's first 25000 instances), the merged entries (the driver's count) as faulted VA blocks x "
             "faulted 64 KiB granules per VA block x distinct pages per faulted granule x entries per distinct page; "
             "each cell driver / model, the ratio model / driver after it.", "",
             "| program | count: driver / model (whole run) | entries in range | VA blocks | granules per VA block "
             "| pages per granule | entries per page |", "| --- | --- | --- | ---: | --- | --- | --- |"]
    logs_r = {k: [] for k in ("entries", "granules_per_block", "pages_per_granule", "entries_per_page")}
    for s, r in rows:
        d, m, _ = r["_dec"]
        drv = (r["driver"] or {}).get("gpu_faults")
        mod = (r["timed"] or {}).get("entries")

        def cell(k, fmt="{:.2f}"):
            ratio = m[k] / d[k] if d[k] else float("nan")
            logs_r[k].append(abs(math.log(ratio)) if ratio > 0 else float("nan"))
            return f"{fmt.format(d[k])} / {fmt.format(m[k])} ({ratio:.2f})"
        lines.append(f"| {r['label']} ({s}) | {drv} / {mod} ({validation.pct(validation.err(mod, drv))}) | "
                     f"{cell('entries', '{:.0f}')} | {d['blocks']} / {m['blocks']} | {cell('granules_per_block')} | "
                     f"{cell('pages_per_granule')} | {cell('entries_per_page')} |")
    med = {k: st.median(v) for k, v in logs_r.items()}
    lines += ["", "Median over the programs of |log(model / driver)|: entries in range "
              f"{med['entries']:.3f}, granules per VA block {med['granules_per_block']:.3f}, pages per faulted granule "
              f"{med['pages_per_granule']:.3f}, entries per page {med['entries_per_page']:.3f} (in each program the ratios of "
              "the four factors multiply to the ratio of the entries).", "",
              "## The batches", "",
              "Per batch (medians over a run's batches in the table's range but its first and last): instances, merged "
              "entries, uTLBs, distinct pages, 64 KiB granules, driver / model; the driver's batches at the batch size "
              "(whole run); the shares of each batch's entries written in the burst after the previous replay (within "
              f"replay_fetch_us = {dev.get('replay_fetch_us')} us) and later than it (umscope.model.events.replay_timeline).",
              "", "| program | instances | entries | uTLBs | pages | granules | driver's batches at the batch size | "
              "in the burst | later |", "| --- | --- | --- | --- | --- | --- | ---: | --- | --- |"]
    for s, r in rows:
        d, m = r["_pb"]
        e = r.get("events") or {}
        td, tm = (r["timeline"]["driver"], r["timeline"]["model"]) if r.get("timeline") else (None, None)
        sh = lambda t, k: f"{t['shares'][k]:.0%}" if t else "n/a"  # noqa: E731
        lines.append(f"| {r['label']} ({s}) | " + " | ".join(f"{d[k]:g} / {m[k]:g}" for k in
                     ("instances", "entries", "utlbs", "pages", "granules"))
                     + f" | {e.get('batches_at_limit')} of {e.get('batches')} | {sh(td, 'burst')} / {sh(tm, 'burst')} | "
                     f"{sh(td, 'later')} / {sh(tm, 'later')} |")
    wn, rf = dev.get("write_ns"), dev.get("replay_fetch_us")
    if wn and rf:
        lines += ["", f"The model's fetch in a service takes what the GPU wrote within replay_fetch_us = {rf} us of the "
                  f"replay at write_ns = {wn} ns an entry: at most {rf * 1e3 / wn:.0f} instances of a burst."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
