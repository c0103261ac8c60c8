"""The report's first section: the node in about ten lines, each a figure of
this run against its bound, then what the applications say about memory
modes. Also the choice of the one record that stands for a case, shared by the
terminal summary and the report.

Nothing here is a number of its own: every line quotes a record of the run
(its median, its bound and the bound's source as the bounds model gave them);
a line whose records are missing is left out, never filled in."""

from collections import OrderedDict

from umscope.model import apps as model_apps
from umscope.report.common import e, html_table, th
from umscope.report.registry import page_section
from umscope.sizes import format_size

TITLE = "This node in brief"


def __getattr__(name):
    # APP_CLASSES: how an application touches memory, for "which mode wins for which access pattern" (the
    # classes of Schieffer et al. section 3.1 and Cooper et al. Table 2), from the applications' registered facts
    # (model/apps.py), read when first used, not at import.
    if name == "APP_CLASSES":
        return model_apps.classes()
    raise AttributeError(name)


REPRESENTATIVE_RULE = ("a bandwidth or latency curve is represented by its largest size; an application by its "
                       "whole run without the CPU's initialisation (total_excl_init_ms: transfers, migration and "
                       "every iteration), not its per-iteration median")


def _x(r) -> dict:
    return r.get("extra") or {}


def app_time_ms(r):
    """An application's whole-run time without CPU initialisation; None where the record lacks it."""
    x = _x(r)
    v = x.get("total_excl_init_ms")
    return v if v is not None else x.get("total_ms")


def representative(records) -> list:
    """One record per measured curve: the largest size of each (case, op, processor, threads, destination,
    direction), in the order the records came. Application records are all kept (one per case)."""
    best = OrderedDict()
    for r in records:
        if r.get("status") != "ok" or r.get("median") is None:
            continue
        x = _x(r)
        key = (r.get("case_id"), r.get("benchmark"), r.get("op"), r.get("processor"), r.get("kind"), r.get("policy"),
               r.get("threads"), x.get("dst_kind"), x.get("dst_policy"), x.get("direction"), x.get("mode"))
        cur = best.get(key)
        if cur is None or (r.get("bytes") or 0) > (cur.get("bytes") or 0):
            best[key] = r
    return list(best.values())


def bound_source(r) -> str:
    x = _x(r)
    return x.get("bound_source") or r.get("bound_source") or ""


def _eff(r):
    x = _x(r)
    return x.get("efficiency", r.get("efficiency")), x.get("bound", r.get("bound"))


def _pick(records, pred):
    """The largest-size record that satisfies pred, or None."""
    found = [r for r in records if r.get("status") == "ok" and r.get("median") is not None and pred(r)]
    return max(found, key=lambda r: (r.get("bytes") or 0, r["median"])) if found else None


def _bw_line(label, r) -> tuple:
    eff, bnd = _eff(r)
    size = format_size(r["bytes"]) if r.get("bytes") else ""
    text = f"{r['median']:.4g} {r['unit']}"
    if eff and bnd:
        src = bound_source(r)
        text += (f" = {100 * eff:.0f}% of the {_x(r).get('datapath') or 'datapath'} bound {bnd:.4g} {r['unit']} ("
                 + (src or "its source was not recorded") + ")")
    else:
        text += " (no bound known: " + (_x(r).get("bound_note") or "the bounds model has none for this path") + ")"
    return label + (f" ({size})" if size else ""), text


def _is(r, bench, op=None, kind=None, policy=None, processor=None, **extra):
    if r.get("benchmark") != bench or (op and r.get("op") != op) or (kind and r.get("kind") != kind):
        return False
    if policy is not None and (r.get("policy") or "") != policy:
        return False
    if processor and not str(r.get("processor") or "").startswith(processor):
        return False
    return all(_x(r).get(k) == v for k, v in extra.items())


def facts(records) -> list:
    """(what, figure) pairs: the node's key figures, each from one record of the run."""
    out = []
    hbm = _pick(records, lambda r: _is(r, "gpu-stream", "triad", "device", "") and not (r.get("params") or {}).get("blocks"))
    if hbm:
        out.append(_bw_line("GPU memory, triad by SMs", hbm))
    for src, dst, what in (("pinned", "device", "host→GPU copy, copy engine"),
                           ("device", "pinned", "GPU→host copy, copy engine")):
        r = _pick(records, lambda r: _is(r, "copy", "ce-copy", src, dst_kind=dst, direction="uni"))
        if r:
            out.append(_bw_line(what, r))
    zc = _pick(records, lambda r: _is(r, "gpu-stream", "read", "pinned") and not (r.get("params") or {}).get("blocks"))
    if zc:
        out.append(_bw_line("GPU reading pinned host memory (zero-copy)", zc))
    peer = _pick(records, lambda r: _is(r, "copy", "ce-copy", "device", direction="uni")
                 and str(_x(r).get("dst_kind", "")).startswith("peer"))
    if peer:
        out.append(_bw_line(f"GPU→{_x(peer).get('dst_kind')} copy, copy engine", peer))
    cpu = _pick(records, lambda r: _is(r, "cpu-stream", "copy", "system") and (r.get("threads") or 0) > 1)
    if cpu:
        out.append(_bw_line(f"CPU memory, copy by {cpu['threads']} threads", cpu))
    for kind, what in (("device", "GPU load latency, GPU memory"), ("pinned", "GPU load latency, pinned host memory")):
        r = _pick(records, lambda r, k=kind: _is(r, "latency", kind=k, processor="gpu"))
        if r:
            out.append((f"{what} ({format_size(r['bytes'])} chase)", f"{r['median']:.4g} {r['unit']}"))
    pp = _pick(records, lambda r: _is(r, "pingpong", kind="pinned", pair="cpu-gpu"))
    if pp:
        out.append(("CPU↔GPU round trip through pinned memory", f"{pp['median']:.4g} {pp['unit']}"))
    return out


PHASES = [("context_ms", "context creation"), ("alloc_ms", "allocation"), ("transfer_ms", "transfer in"),
          ("compute_ms", "the iterations"), ("back_ms", "copy-back"), ("free_ms", "free")]


def app_winners(records) -> list:
    """Per application measured in at least two GPU modes at one size: (class, app, {mode: record}, best mode,
    the mode it is set against: explicit where it was measured and lost, else the runner-up), by whole-run time
    without the CPU's initialisation."""
    by = OrderedDict()
    for r in records:
        if r.get("op") != "app" or r.get("status") != "ok" or app_time_ms(r) is None:
            continue
        x = _x(r)
        if x.get("processor_kind") == "cpu" or str(r.get("processor", "")).startswith("cpu"):
            continue
        key = (x.get("app") or r.get("benchmark"), r.get("bytes"))
        by.setdefault(key, {})[x.get("mode") or r.get("kind")] = r
    out = []
    for cls, names in model_apps.classes().items():
        for (app, _size), recs in by.items():
            if app not in names or len(recs) < 2:
                continue
            ranked = sorted(recs, key=lambda m: app_time_ms(recs[m]))
            best = ranked[0]
            other = "explicit" if best != "explicit" and "explicit" in recs else ranked[1]
            out.append((cls, app, recs, best, other))
    return out


def _same(a, b) -> bool:
    """Whether two per-iteration medians are equal: within 5% of the larger. (Their min–max ranges are no test:
    a managed run's first iteration, which migrates, stretches its range over the other's.)"""
    return abs(a["median"] - b["median"]) <= 0.05 * max(a["median"], b["median"])


def deciding_phases(win, lose) -> list:
    """(phase, loser's ms, winner's ms) of the phases that make up most of the gap, largest first."""
    gap = app_time_ms(lose) - app_time_ms(win)
    diffs = sorted(((_x(lose).get(k) or 0) - (_x(win).get(k) or 0), k, name) for k, name in PHASES)
    out = []
    for d, k, name in reversed(diffs):
        if d <= 0 or (out and d < 0.2 * gap):
            break
        out.append((name, _x(lose).get(k) or 0, _x(win).get(k) or 0))
        if len(out) == 2:
            break
    return out


def host_buffers(mode) -> str:
    """What the mode puts the arrays in, as the native runner declares it (`umbench list --json`)."""
    try:
        from umscope import registry
        return next((m.get("description") or m.get("help") or "" for m in registry.load()["modes"]
                     if m.get("name") == mode), "")
    except Exception:  # noqa: BLE001 - a report drawn without umbench names the mode only
        return ""


def winner_line(cls, app, recs, best, other) -> str:
    """One line: the winning mode, by how much and against which, the phases that decide it, and per-iteration
    times, every figure from the records."""
    w, o = recs[best], recs[other]
    tw, to = app_time_ms(w), app_time_ms(o)
    line = (f"<b>{e(app)}</b> ({e(cls)}): <b>{e(best)}</b> wins, {tw:.4g} ms whole run against {e(other)} "
            f"{to:.4g} ms ({to / tw:.2f}×)")
    periter = (f"per-iteration times {'equal' if _same(w, o) else 'differ'}: {w['median']:.3g} ms {e(best)}, "
               f"{o['median']:.3g} ms {e(other)}")
    phases = deciding_phases(w, o)
    if phases:
        line += f". {e(other)} loses on " + " and ".join(f"{n} {lv:.3g} ms vs {wv:.3g}" for n, lv, wv in phases)
    return line + f"; {periter}."


def buffers_note(wins) -> str:
    """Once, under the list: what each mode named above puts its buffers in (the host buffers' kind)."""
    modes = list(OrderedDict.fromkeys(m for w in wins for m in (w[3], w[4])))
    parts = [f"<b>{e(m)}</b>: {e(host_buffers(m))}" for m in modes if host_buffers(m)]
    return "<p class=note>Buffers — " + "; ".join(parts) + ".</p>" if parts else ""


def section(records, findings_html="") -> str:
    """The headline HTML: key figures, then the winning memory mode per application class."""
    rows = facts(records)
    wins = app_winners(records)
    if not rows and not wins:
        return ""
    parts = [f"<h2 id=headline>{TITLE}</h2>"]
    if rows:
        parts.append(html_table(None, [[th(w), f] for w, f in rows]))
    if wins:
        li = [f"<li>{winner_line(*w)}</li>" for w in wins]
        parts.append("<p>Which memory mode wins, per application (whole run without the CPU's initialisation), and "
                     "the phase that decides it:</p><ul class=answer>" + "".join(li) + "</ul>" + buffers_note(wins))
    if findings_html:
        parts.append(findings_html)
    parts.append(f"<p class=note>Each line quotes one record of this run; {e(REPRESENTATIVE_RULE)}. "
                 "Bounds name their source. The sections below hold every record.</p>")
    return "".join(parts)


@page_section("headline", TITLE, order=10)
def _page(page) -> str:
    return section(page.records)
