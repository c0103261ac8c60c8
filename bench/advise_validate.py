#!/usr/bin/env python3
"""`umscope advise` against measurement (issue 39): for every application advise covers, at each footprint, the
mode advise recommends against the mode measured fastest, by the whole run and by the per-iteration time.

On the GPU machine, in one call, with umscope's own commands (each `python3 -m umscope ... --json --store STORE`,
bench/node_reference.py's run_umscope):
1. the machine's own figures for advise: `umscope bench migration` (demand migration's first pass, the prefetch
   rate, the GPU reading pinned memory over the link, 256 MiB) and `umscope bench copy` (the copy engines' rates
   between host and device, 256 MiB), their records kept in one JSON-lines file that `advise --figures` reads;
2. `umscope app run APP --mode all --footprint F --check 0` for every application and footprint, --runs rounds
   (round 1: every application at every footprint, then round 2, ...), so drift over the session reaches every
   mode and footprint alike; every mode checks its result (the records' `verified`);
3. `umscope advise APP --footprint F --iterations N --figures FILE --json`, N the measured runs' own iterations;
4. the table, the three published figures and their provenance: docs/advise-validation-KIND.md (or --out);
   with --write-validated, the `advise` entry of python/umscope/model/validated.json, which `umscope advise`
   prints beside every recommendation.

    python3 bench/advise_validate.py [--apps a,b] [--footprints 16M,64M,256M] [--runs 3] [--budget 540]
                                     [--kind h100] [--out FILE] [--raw-out FILE] [--store FILE]
    python3 bench/advise_validate.py --from-raw FILE[.gz] [--note TEXT] [--out FILE]
                                     [--write-validated [--validated-out FILE]]

About 5 minutes on one H100 with the defaults (13 applications x 3 footprints x 3 rounds of 6-7 modes: about
95 s a round, of which some 55 s are the 117 `umscope` processes' start, probe and report; the figures about
10 s; the 39 advise calls about 20 s). --budget (default 540 s, under the device's 10-minute command limit)
starts no round that the previous one says would not finish in time, and no advise call after it: what was
measured is kept (--raw-out is written as it comes) and the document says how many runs each case had."""
import argparse
import gzip
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _commit  # bench/_commit.py
from model_validate import pct
from node_reference import run_umscope
from node_reference_pages import show
from seeds import slim

from umscope import inputs
from umscope.errors import UsageError
from umscope.model import calibrated
from umscope.model import simulate as sim
from umscope.sizes import format_size, parse_size_list, size_arg

ROOT = Path(__file__).resolve().parent.parent
FOOTPRINTS = "16M,64M,256M"
# The simulated applications but the aliases: sgemm is gemm's source with --precision fp32, gemm's own default.
APPS = tuple(a for a in sim.SIM_APPS if a != "sgemm")
# What each recommendation is measured as: zero copy is the GPU reading host memory in place, as pinned memory
# (cudaMallocHost) gives it, the first way advise's hint names.
ADVISED_AS = {"managed": "managed", "managed-prefetch": "managed-prefetch", "zerocopy": "pinned", "system": "system"}
# The modes a user picks from instead of explicit copies; explicit is judged apart (advise's verdict on it).
CHOICES = ("managed", "managed-prefetch", "managed-advice", "pinned", "registered", "system")
FIGURE_CMDS = (["bench", "migration", "--kind", "managed,first_touch=cpu", "--kind",
                "managed,first_touch=cpu,prefetch=gpu", "--kind", "pinned", "--size", "256M", "--iterations", "20",
                "--filter", "bytes=256MiB"],
               ["bench", "copy", "--kind", "system", "--kind", "device", "--size", "256M", "--filter", "engine=ce"])
TARGET = 0.85  # issue 39: on the H100, the advice is the fastest or within its band in >= 85% of the cases
NOT_MEASURED = ("skipped", "failed", "refused", "timeout")
ADVISE_S = 1.0  # planning figure: one advise call (umsim's replays and the fault-cost calibration)


def kind_of(gpu_name: str) -> str:
    """A short machine name for the document's file: 'NVIDIA H100 80GB HBM3' -> 'h100'."""
    m = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b", gpu_name or "")
    return m.group(1).lower() if m else "gpu"


def check_kind(kind, gpu_name):
    """--kind names the document after a GPU model: it must not name another model than the GPU that runs (or
    ran) the measurement (a machine lent under one name may hand out another GPU). A name that is no GPU model
    (e.g. 'lab-node') is the user's to choose."""
    mine = kind_of(gpu_name)
    if kind and mine != "gpu" and kind_of(kind.upper()) not in ("gpu", mine):
        raise UsageError(f"--kind {kind} names another GPU than the one that ran this: {gpu_name} ({mine})")


def parse_apps(text: str) -> list:
    names = [a for a in text.split(",") if a]
    bad = [a for a in names if a not in sim.SIM_APPS]
    if bad or not names:
        raise UsageError(f"unknown application {(bad or [text])[0]!r} for advise (known: {', '.join(sim.SIM_APPS)})")
    return names


def app_command(name: str, footprint: str) -> list:
    """`umscope app run` of the application in every mode at the footprint, with the suite's own short-case
    parameters besides (syr2k: 2 iterations); --check 0: each mode's own sampled check rather than the full
    CPU reference at 64 MiB and below (its time is outside the measured phases, not its result)."""
    from umscope import apps
    extra = [x for k, v in apps.APPS[name].small.items() if k != "footprint" for x in (f"--{k}", str(v))]
    return ["app", "run", name, "--mode", "all", "--footprint", footprint, "--check", "0", *extra]


# ---------------------------------------------------------------- measuring


def measure(a, names, foots, emit, log):
    """Runs the figures, the rounds and the advice; every record goes to emit() as it comes."""
    t0 = time.time()
    left = lambda: a.budget - (time.time() - t0)  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        store = a.store or f"{d}/advise.sqlite"

        def umscope(cmd, tag):
            recs, rc, wall = run_umscope(cmd + ["--report", f"{d}/r.html", "--no-progress"], store, max(1, left()))
            emit({"_tag": "command", "what": tag, "command": show(cmd), "exit": rc, "wall_s": round(wall, 2)})
            # measured rows only: a skipped, failed or refused case's row holds its reason, no measurement; the
            # per-repetition conditions left out of the raw records (as bench/seeds.py keeps them)
            return [inputs.flat(slim(r)) for r in recs if isinstance(r, dict) and r.get("metric") is not None
                    and r.get("status") not in NOT_MEASURED]
        fig = []
        for cmd in FIGURE_CMDS:
            log(f"figures: {show(cmd)}")
            fig += umscope(cmd, "figures")
        for r in fig:
            emit(dict(r, _tag="figures"))
        figfile = Path(d) / "figures.jsonl"
        figfile.write_text("".join(json.dumps(r) + "\n" for r in fig))
        try:  # what advise --figures will read, checked as it checks it
            usable = bool(fig) and bool(calibrated.checked_figures(fig, "the figures' records"))
            why = "the figure commands measured none of those it reads"
        except UsageError as e:
            usable, why = False, str(e)
        if not usable:
            emit({"_tag": "note", "text": f"advise used its packaged h100-sxm-pcie5 figures: {why}"})
        iters, round_s = {}, 0.0
        for rnd in range(a.runs):
            if rnd and left() < round_s + ADVISE_S * len(names) * len(foots):
                log(f"budget: {a.budget:.0f} s would be passed; round {rnd + 1} and later not run")
                emit({"_tag": "note", "text": f"rounds {rnd + 1}-{a.runs} not run: the budget of {a.budget:.0f} s "
                      f"would have been passed (a round took {round_s:.0f} s)"})
                break
            t1 = time.time()
            for name in names:
                for fp in foots:
                    log(f"round {rnd + 1}/{a.runs}: {name} at {format_size(fp)} ({time.time() - t0:.0f} s)")
                    for r in umscope(app_command(name, size_arg(fp)), f"{name} {size_arg(fp)}"):
                        if r.get("app") and r.get("mode"):
                            emit(dict(r, _tag="app", _round=rnd, _footprint=fp))
                            iters.setdefault((name, fp), r.get("iterations"))
            round_s = time.time() - t1
        for name in names:
            for fp in foots:
                if left() < ADVISE_S:
                    emit({"_tag": "advise", "app": name, "footprint": fp, "error": "not run: budget spent"})
                    continue
                cmd = ["advise", name, "--footprint", size_arg(fp)]
                if iters.get((name, fp)):
                    cmd += ["--iterations", str(iters[(name, fp)])]
                cmd += (["--figures", str(figfile)] if usable else []) + ["--json"]
                res, rc, _ = run_umscope(cmd, store, max(1, left()))
                ok = rc == 0 and isinstance(res, dict) and res.get("recommended")
                emit({"_tag": "advise", "app": name, "footprint": fp, "iterations": iters.get((name, fp)),
                      "command": show([*cmd[:-2], "FIGURES", "--json"] if usable else cmd),
                      **({"advice": res} if ok else {"error": f"exit {rc}"})})


# ---------------------------------------------------------------- judging


def whole_ms(r):
    """The run without the CPU's initialisation of the inputs (the application writing its values: no memory
    mode's choice, and not in advise's replay)."""
    if r.get("total_excl_init_ms") is not None:
        return float(r["total_excl_init_ms"])
    if r.get("total_ms") is not None:
        return float(r["total_ms"]) - float(r.get("init_ms") or 0)
    return None


def measured(recs) -> dict:
    """{(app, footprint): {mode: [(whole-run ms, per-iteration ms), ...]}} of the application records."""
    out = {}
    for r in recs:
        if r.get("_tag") == "app" and r.get("metric", "time_per_iteration") == "time_per_iteration":
            it = float(r["median"]) if r.get("median") is not None else None
            out.setdefault((r["app"], int(r["_footprint"])), {}).setdefault(r["mode"], []).append((whole_ms(r), it))
    return out


def fastest(runs: dict, as_mode: str):
    """The fastest of the CHOICES by the median of their runs, its band (min-max of its runs), and where the
    advised mode falls: a hit when it is the fastest or its median is within that band."""
    runs = {m: [x for x in v if x is not None] for m, v in runs.items() if m in CHOICES}
    med = {m: statistics.median(v) for m, v in runs.items() if v}
    if as_mode not in med:
        return None
    best = min(med, key=med.get)
    band = (min(runs[best]), max(runs[best]))
    lost = med[as_mode] - med[best]
    return {"fastest": best, "band": band, "fastest_ms": med[best], "advised_ms": med[as_mode],
            "hit": as_mode == best or med[as_mode] <= band[1], "lost_ms": lost, "lost": lost / med[best]}


def explicit_judged(said: dict, exp: list, adv: list):
    """advise's verdict on explicit copies (wins, loses, the same) against explicit's measured runs and the
    advised mode's (whole run). The same is right where their run-to-run bands overlap."""
    if said.get("wins") is None or not exp or not adv:
        return None
    ratio = statistics.median(adv) / statistics.median(exp)  # > 1: explicit faster
    word = "same" if said.get("tie") else ("wins" if said["wins"] else "loses")
    right = (min(exp) <= max(adv) and min(adv) <= max(exp)) if word == "same" else said["wins"] == (ratio > 1)
    return {"said": word, "measured_ratio": ratio, "right": right}


def judge(app, foot, modes, advice) -> dict:
    row = {"app": app, "footprint": foot, "runs": min(len(v) for v in modes.values()),
           "modes": sorted(modes)}
    if not advice or not advice.get("advice"):
        row["status"] = (advice or {}).get("error") or "no advice recorded"
        return row
    res = advice["advice"]
    row["advised"] = res["recommended"]
    row["advised_as"] = as_mode = ADVISED_AS.get(res["recommended"], res["recommended"])
    whole = {m: [w for w, _ in v] for m, v in modes.items()}
    row["whole"] = fastest(whole, as_mode)
    row["iteration"] = fastest({m: [i for _, i in v] for m, v in modes.items()}, as_mode)
    if row["whole"] is None:
        row["status"] = f"the advised mode ({as_mode}) was not measured here"
        return row
    pred = res.get("predicted_gain_vs_managed")
    mgd = [x for x in whole.get("managed", []) if x is not None]
    adv = [x for x in whole.get(as_mode, []) if x is not None]
    row["predicted_gain"] = pred
    row["measured_gain"] = statistics.median(mgd) / statistics.median(adv) if mgd and adv else None
    # advised plain managed: a gain of 1 by definition on both sides, nothing predicted to check
    row["gain_error"] = (pred / row["measured_gain"] - 1 if pred and row["measured_gain"] and as_mode != "managed"
                         else None)
    row["explicit"] = explicit_judged(res.get("explicit") or {}, [x for x in whole.get("explicit", []) if x], adv)
    return row


def rows_of(recs) -> list:
    advice = {(r["app"], int(r["footprint"])): r for r in recs if r.get("_tag") == "advise"}
    return [judge(app, foot, modes, advice.get((app, foot))) for (app, foot), modes in sorted(measured(recs).items())]


def summary(rows) -> dict:
    """The three published figures: the share of cases where the advice is the fastest or within its band (by
    the whole run, and by the per-iteration time), the time lost when it is not, the predicted gain's error."""
    w = [r for r in rows if r.get("whole")]
    it = [r for r in rows if r.get("iteration")]
    lost = [r["whole"]["lost"] for r in w if not r["whole"]["hit"]]
    lost_ms = [r["whole"]["lost_ms"] for r in w if not r["whole"]["hit"]]
    gerr = [abs(r["gain_error"]) for r in rows if r.get("gain_error") is not None]
    exp = [r["explicit"]["right"] for r in rows if r.get("explicit")]
    hits, hits_it = sum(r["whole"]["hit"] for r in w), sum(r["iteration"]["hit"] for r in it)
    return {"cases": len(w), "hits": hits, "share": hits / len(w) if w else None,
            "cases_iteration": len(it), "hits_iteration": hits_it, "share_iteration": hits_it / len(it) if it else None,
            "misses": len(lost), "lost_median": statistics.median(lost) if lost else None,
            "lost_max": max(lost) if lost else None, "lost_ms_median": statistics.median(lost_ms) if lost_ms else None,
            "gain_cases": len(gerr), "gain_error_median": statistics.median(gerr) if gerr else None,
            "gain_error_p90": pct(gerr, 0.9) if gerr else None,
            "explicit_cases": len(exp), "explicit_right": sum(exp),
            "runs_min": min((r["runs"] for r in rows), default=0), "not_judged": len(rows) - len(w)}


# ---------------------------------------------------------------- writing


def _num(x, fmt):
    return "-" if x is None else fmt.format(x)


def _pc(x, sign=False):
    return "-" if x is None else (f"{x:+.1%}" if sign else f"{x:.1%}")


def figures_text(s: dict, kind: str) -> list:
    target = (f" (target >= {TARGET:.0%} on the H100: {'met' if (s['share'] or 0) >= TARGET else 'missed'})"
              if kind == "h100" else " (the target, >= 85%, is set for the H100; reported here)")
    return [f"**(a) The advised mode is the fastest or within the fastest's run-to-run band in {s['hits']} of "
            f"{s['cases']} application x footprint cases ({_pc(s['share'])}) by the whole run**{target}; by the "
            f"per-iteration time in {s['hits_iteration']} of {s['cases_iteration']} ({_pc(s['share_iteration'])}).",
            "",
            f"**(b) Time lost when it is not: {s['misses']} case{'' if s['misses'] == 1 else 's'}, median {_pc(s['lost_median'])} "
            f"({_num(s['lost_ms_median'], '{:.1f} ms')}), at most "
            f"{_pc(s['lost_max'])}** slower than the fastest mode (whole run).",
            "",
            f"**(c) The predicted gain over plain managed memory is off by a median {_pc(s['gain_error_median'])}, "
            f"90th percentile {_pc(s['gain_error_p90'])}** (|predicted / measured - 1| over the {s['gain_cases']} "
            "cases whose advice is not plain managed memory: there the gain is 1 on both sides).",
            "",
            f"Explicit copies: advise's verdict (keep cudaMemcpy, or not) is right in {s['explicit_right']} of "
            f"{s['explicit_cases']} cases against explicit's measured runs."]


def render(rows, meta, recs, cmd) -> str:
    s = summary(rows)
    kind = meta.get("kind", "gpu")
    adv = next((r["advice"] for r in recs if r.get("_tag") == "advise" and r.get("advice")), {})
    cmds = [r for r in recs if r.get("_tag") == "command"]
    fig_cmds = "; ".join(f"`{c['command']}` (exit {c['exit']}, {c['wall_s']} s)" for c in cmds if c["what"] == "figures")
    failed = sorted({c["what"] for c in cmds if c["what"] != "figures" and c["exit"] not in (0, "0")})
    lines = [f"# `umscope advise` against measurement: {meta.get('gpu', '?')} (generated by bench/advise_validate.py)",
             "",
             f"Machine: {meta.get('gpu', '?')} (`{kind}`); measured at umscope commit {meta.get('commit', '?')}, "
             f"{meta.get('when', '?')}, {meta.get('wall_s', 0):.0f} s; command `{meta.get('command', '?')}`"
             + ("" if cmd == meta.get("command") else f"; this page written by `{cmd}` at commit {_commit.commit()}")
             + f". advise's model: {adv.get('model_version', '?')}.",
             "",
             f"Figures advise priced its replays with: {adv.get('figures_source', 'none recorded')}. They were measured "
             f"in the same session by {fig_cmds or 'no command (the packaged figures were used)'}, whose records "
             "`advise --figures FILE` read.",
             "",
             "Method. Each application runs with `umscope app run APP --mode all --footprint F --check 0` (every "
             "mode that runs here; each checks its own result), in rounds: every application at every footprint, "
             "then again. `umscope advise APP --footprint F --iterations N --figures FILE --json` is given the "
             "measured runs' own iteration count. The whole run is the record's total time without the CPU's "
             "initialisation of the inputs (`total_excl_init_ms`: the application writing its values, the same work "
             "in every mode and not in advise's replay); the per-iteration time is the run's median iteration. The "
             "fastest mode is the one with the smallest median over its runs among the modes a user picks instead "
             f"of explicit copies ({', '.join(CHOICES)}: those measured here); its band is the min-max of its runs. "
             "The advice is a hit when it is the fastest mode or its median lies within that band. zerocopy is "
             "measured as pinned (cudaMallocHost: the GPU reads host memory in place). Time lost: the advised "
             "mode's median minus the fastest's, over the fastest's. Gain: plain managed memory's median over the "
             "advised mode's (measured) against advise's modelled gain. Explicit copies: advise says they win, lose "
             "or are the same as the advised mode; measured, explicit's median against the advised mode's (the "
             "same: their bands overlap).",
             "",
             f"Runs per case: at least {s['runs_min']}"
             + (f" (fewer than 3 where the budget ended the rounds)" if s["runs_min"] < 3 else "") + "."
             + (f" Commands that failed (a case of them failed or was refused): {', '.join(failed)}." if failed else ""),
             ""]
    notes = [f"{n['text']}." for n in recs if n.get("_tag") == "note"]
    lines += [x for n in notes for x in (n, "")]  # a paragraph each
    lines += figures_text(s, kind) + [""]
    lines += ["| application | footprint | runs | advised | fastest (whole run) | its band ms | advised ms | hit | "
              "time lost | fastest (per iteration) | hit | predicted gain | measured gain | gain error | explicit: "
              "advise says | explicit measured |",
              "| --- | --- | ---: | --- | --- | ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        head = f"| {r['app']} | {format_size(r['footprint'])} | {r['runs']} |"
        if not r.get("whole"):
            lines.append(head + f" {r.get('advised', '-')} | not judged: {r['status']} |" + " |" * 12)
            continue
        w, i, e = r["whole"], r["iteration"], r.get("explicit")
        adv_name = r["advised"] + (f" (as {r['advised_as']})" if r["advised_as"] != r["advised"] else "")
        exp = "-" if not e else (f"{e['measured_ratio']:.2f}x faster" if e["measured_ratio"] > 1 else
                                 f"{1 / e['measured_ratio']:.2f}x slower") + f": {'right' if e['right'] else 'wrong'}"
        lines.append(
            head + f" {adv_name} | {w['fastest']} | {w['band'][0]:.2f}-{w['band'][1]:.2f} | {w['advised_ms']:.2f} | "
            f"{'yes' if w['hit'] else 'no'} | {w['lost_ms']:+.2f} ms ({w['lost']:+.0%}) | "
            f"{i['fastest'] if i else '-'} | {('yes' if i['hit'] else 'no') if i else '-'} | "
            f"{_num(r['predicted_gain'], '{:.2f}x')} | {_num(r['measured_gain'], '{:.2f}x')} | "
            f"{_pc(r['gain_error'], True)} | {e['said'] if e else '-'} | {exp} |")
    return "\n".join(lines) + "\n"


def validated_entry(rows, meta, recs, doc) -> dict:
    """advise's validated error as model/validated.json holds it (key "advise"; `umscope advise` prints it,
    model/driver.py advise_validated): the three figures, where, when, at which commit, with which figures, and
    per case (key 'APP/FOOTPRINT') the advised and the fastest mode, the hit, the time lost, the gain's error."""
    s = summary(rows)
    adv = next((r["advice"] for r in recs if r.get("_tag") == "advise" and r.get("advice")), {})
    r4 = lambda x: None if x is None else round(x, 4)  # noqa: E731
    per = {}
    for r in rows:
        if r.get("whole"):
            per[f"{r['app']}/{format_size(r['footprint'])}"] = {
                "advised": r["advised"], "fastest": r["whole"]["fastest"], "hit": r["whole"]["hit"],
                "lost": r4(r["whole"]["lost"]), "gain_error": r4(r["gain_error"])}
    return {"model_version": adv.get("model_version"), "machine": meta.get("gpu"), "kind": meta.get("kind"),
            "commit": meta.get("commit"), "when": meta.get("when"), "doc": doc, "cases": s["cases"],
            "runs": s["runs_min"], "hits": s["hits"], "share": r4(s["share"]), "hits_iteration": s["hits_iteration"],
            "cases_iteration": s["cases_iteration"], "share_iteration": r4(s["share_iteration"]),
            "misses": s["misses"], "lost_median": r4(s["lost_median"]), "lost_max": r4(s["lost_max"]),
            "gain_cases": s["gain_cases"], "gain_error_median": r4(s["gain_error_median"]),
            "gain_error_p90": r4(s["gain_error_p90"]), "explicit_right": s["explicit_right"],
            "explicit_cases": s["explicit_cases"], "figures": adv.get("figures_source"), "per_case": per}


def write_out(a, rows, meta, recs, cmd):
    text = render(rows, meta, recs, cmd)
    if a.out in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    if a.write_validated:
        doc = a.out if a.out not in (None, "-") else f"docs/advise-validation-{meta.get('kind', 'gpu')}.md"
        try:
            doc = str(Path(doc).resolve().relative_to(ROOT))
        except ValueError:
            pass
        path = a.validated_out or _commit.validated_path()
        calibrated.write_validated("advise", validated_entry(rows, meta, recs, doc), path)
        print(f"wrote the advise entry of {path}", file=sys.stderr)
    s = summary(rows)
    print(f"{'application':<11} {'footprint':>9} {'advised':<17} {'fastest (whole)':<17} {'hit':<4} {'lost':>7} "
          f"{'gain err':>8}")
    for r in rows:
        w = r.get("whole")
        print(f"{r['app']:<11} {format_size(r['footprint']):>9} {r.get('advised', '-'):<17} "
              + (f"{w['fastest']:<17} {'yes' if w['hit'] else 'no':<4} {w['lost']:>+7.0%} {_pc(r['gain_error'], True):>8}"
                 if w else f"not judged: {r['status']}"))
    print(f"hit {s['hits']} of {s['cases']} ({_pc(s['share'])}) by whole run, {s['hits_iteration']} of "
          f"{s['cases_iteration']} by per-iteration; lost when not: median {_pc(s['lost_median'])}; gain error median "
          f"{_pc(s['gain_error_median'])}, p90 {_pc(s['gain_error_p90'])}; explicit verdict right {s['explicit_right']} "
          f"of {s['explicit_cases']}" + ("" if a.out in (None, "-") else f"; wrote {a.out}"))


def load(path) -> list:
    """A --raw-out file, plain or gzip-compressed (as the one kept in docs/ is)."""
    try:
        text = gzip.open(path, "rt").read() if str(path).endswith(".gz") else Path(path).read_text()
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    except (OSError, EOFError, ValueError) as e:
        raise UsageError(f"--from-raw {path}: {getattr(e, 'strerror', None) or e}") from None


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default=",".join(APPS), help="applications (default: every one advise covers but "
                    "sgemm, gemm's source at gemm's own default precision)")
    ap.add_argument("--footprints", default=FOOTPRINTS, help=f"in-memory footprints (default {FOOTPRINTS}); those "
                    "above 80%% of the GPU's free memory are left out and named")
    ap.add_argument("--runs", type=int, default=3, help="rounds: runs of every mode (default 3)")
    ap.add_argument("--budget", type=float, default=540, help="seconds: no round or advise call started past it")
    ap.add_argument("--kind", help="the machine's short name in the document's file name (default: from the GPU's "
                    "name, e.g. h100)")
    ap.add_argument("--out", help="the document (default docs/advise-validation-KIND.md; with --from-raw, printed)")
    ap.add_argument("--raw-out", help="every record as JSON lines, written as it comes (for --from-raw)")
    ap.add_argument("--store", help="the results store the commands write (default: a temporary one)")
    ap.add_argument("--from-raw", metavar="FILE", help="the document again from a --raw-out file (or its gzip); runs "
                    "nothing")
    ap.add_argument("--note", action="append", default=[], help="a sentence for the document's header, e.g. what "
                    "else ran on the machine meanwhile (may be repeated)")
    ap.add_argument("--write-validated", action="store_true",
                    help="write the `advise` entry of model/validated.json (or --validated-out)")
    ap.add_argument("--validated-out", help="where --write-validated writes (default: the source tree's python/umscope/model/"
                    "validated.json beside bench/, else the installed package's)")
    return ap


def main(argv=None):
    a = parser().parse_args(argv)
    cmd = "python3 bench/advise_validate.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    try:
        names = parse_apps(a.apps)
        foots = parse_size_list(a.footprints)
        if a.runs < 1:
            raise UsageError(f"--runs must be at least 1, got {a.runs}")
        if a.from_raw:
            recs = load(a.from_raw) + [{"_tag": "note", "text": n.rstrip(".")} for n in a.note]
            metas = [r for r in recs if r.get("_tag") == "meta"]  # the last: written at the end, with the wall time
            meta = dict(metas[-1]) if metas else {}
            if a.kind and a.kind != meta.get("kind"):
                check_kind(a.kind, meta.get("gpu"))
                recs.append({"_tag": "note", "text": f"measured under the label {meta.get('kind')!r}, relabelled "
                             f"{a.kind!r} (--kind) for the GPU that ran it, {meta.get('gpu')}"})
                meta["kind"] = a.kind
            write_out(a, rows_of(recs), meta, recs, cmd.strip())
            return 0
    except UsageError as e:
        print(f"advise_validate: {e}", file=sys.stderr)
        return 2
    from umscope import plans, probe
    fp = probe.probe()
    if not fp.get("gpus"):
        print(f"advise_validate: no GPU: {(fp.get('cuda') or {}).get('why_no_gpu')}", file=sys.stderr)
        return 2
    g = fp["gpus"][0]
    try:
        check_kind(a.kind, g.get("name"))
    except UsageError as e:
        print(f"advise_validate: {e}", file=sys.stderr)
        return 2
    free = plans.gpu_free(fp)
    kept = [f for f in foots if not free or f <= 0.8 * free]
    meta = {"_tag": "meta", "gpu": g.get("name"), "kind": a.kind or kind_of(g.get("name")), "commit": _commit.commit(),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": cmd.strip(),
            "apps": names, "footprints": kept, "runs": a.runs, "gpu_free_bytes": free}
    a.out = a.out or str(ROOT / "docs" / f"advise-validation-{meta['kind']}.md")
    recs, raw = [], open(a.raw_out, "w") if a.raw_out else None

    def emit(r):
        recs.append(r)
        if raw:
            raw.write(json.dumps(r) + "\n")
            raw.flush()
    emit({k: v for k, v in meta.items()})
    for n in a.note:
        emit({"_tag": "note", "text": n.rstrip(".")})
    if len(kept) < len(foots):
        emit({"_tag": "note", "text": "footprints left out, above 80% of the GPU's free memory "
              f"({format_size(free)}): " + ", ".join(format_size(f) for f in foots if f not in kept)})
    t0 = time.time()
    print(f"{g.get('name')}: {len(names)} applications x {len(kept)} footprints x {a.runs} rounds "
          f"(about 5 minutes on an H100 with the defaults; budget {a.budget:.0f} s)", file=sys.stderr, flush=True)
    measure(a, names, kept, emit, lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    meta["wall_s"] = time.time() - t0
    emit(dict(meta, _tag="meta"))  # again at the end, with the wall time (the last one is read)
    if raw:
        raw.close()
    meta = [r for r in recs if r.get("_tag") == "meta"][-1]
    write_out(a, rows_of(recs), meta, recs, cmd.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
