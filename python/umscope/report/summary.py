"""The terminal summary of a run (`umscope run`, `bench`, `app`): a table of the measured records with their
spread and fraction of the bound, the bounds' sources, the cases measured under a throttled or shared GPU,
and every case that did not run to completion with its reason. The HTML report holds the rest."""

from umscope import conditions
from umscope.report import headline
from umscope.report.common import kind_label, spread_threshold
from umscope.sizes import format_size


def print_summary(records, cases, representative=False):
    """One row per record; with `representative` (the default suite), one row per curve, as the report's
    headline picks it: a curve's largest size, an application's whole run without CPU initialisation."""
    ok = [r for r in records if r["status"] == "ok" and r["median"] is not None]
    if representative:
        ok = [_whole_run(r) for r in headline.representative(ok)]
        print(f"one row per case: {headline.REPRESENTATIVE_RULE}; every record is in the report")
    if ok:
        limit = spread_threshold(ok)[0]
        # Columns as wide as their longest entry (up to a limit), so a long op name does not shift the row.
        opw = min(max(6, *(len(str(r["op"] or "")) for r in ok)), 24)
        benchw = min(max(11, *(len(str(r["benchmark"] or "")) for r in ok)), 16)
        print(f"{'benchmark':<{benchw}} {'op':<{opw}} {'proc':<5} {'kind [policy] (→ destination)':<58} {'size':>8} "
              f"{'thr':>4} {'median':>10} {'spread':>7}  {'unit':<5} {'of bound':>8}")
        for r in ok:
            kind = kind_label(r)
            flag = " !" if (r["spread"] or 0) > limit else ""
            print(f"{str(r['benchmark'])[:benchw]:<{benchw}} {str(r['op'] or '')[:opw]:<{opw}} {r['processor']:<5} "
                  f"{kind[:58]:<58} "
                  f"{format_size(r['bytes']) if r['bytes'] else '':>8} {r['threads'] or '':>4} "
                  f"{r['median']:>10.4g} {100 * (r['spread'] or 0):>6.1f}%{flag:2} {r['unit']:<5} "
                  f"{_eff(r):>8}")
    sources = {}
    for r in ok:
        x = r.get("extra") or {}
        if x.get("bound"):
            sources.setdefault(x.get("datapath"), x.get("bound_source") or "source not recorded")
    if sources:
        print("\nbounds (\"of bound\" = median / the bound of the limiting datapath):")
        for path, src in sources.items():
            print(f"  {path:<12} {src}")
    flagged = conditions.flagged_cases([r for r in records if r["status"] == "ok"])
    if flagged:
        print(f"\n{len(flagged)} case(s) measured while the GPU was throttled or shared (figures may be low):")
        for cid, f in flagged.items():
            print(f"  {cid}: {'; '.join(f)}")
    groups = {}
    for c in cases:
        if c["status"] != "ok":
            groups.setdefault((c["status"], c["reason"]), []).append(c["case_id"])
    if groups:
        print(f"\n{sum(len(v) for v in groups.values())} case(s) did not run to completion:")
        for (status, reason), ids in groups.items():
            print(f"  {status} ({len(ids)}): {reason}")
            for cid in ids:
                print(f"      {cid}")


def _whole_run(r):
    """An application record shown by its whole-run time (spread left out: it is one run)."""
    t = headline.app_time_ms(r) if r.get("op") == "app" else None
    return dict(r, median=t, spread=None, unit="ms") if t is not None else r


def _eff(r):
    e = (r.get("extra") or {}).get("efficiency")
    return f"{100 * e:.0f}%" if e else ""
