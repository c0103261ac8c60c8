"""How each record was verified, and the cross-mode checksum check.

A record's `verified` names the check that ran and passed before it was
emitted or stored:

  cpu-reference        every result compared with values the CPU computed (an application's CPU
                       reference, QV's CPU simulator, a benchmark's expected pattern)
  cross-mode-checksum  the application's result checksum equals the one of its explicit mode in the
                       same run (set here, after the cases ran)
  invariant            a property every correct run keeps (QV's state norm, a pointer chase ending at
                       its start, a ping-pong flag counting every turn)
  none                 no check

Stores written before methods were named hold booleans: true reads as
"unnamed (old store)", false or missing as "none".
"""

import json

METHODS = ("cpu-reference", "cross-mode-checksum", "invariant", "none")
OLD = "unnamed (old store)"


def method(rec) -> str:
    """The verification method of a record (a store row with `extra`, or a flat record)."""
    v = rec.get("verified") if "verified" in rec else (rec.get("extra") or {}).get("verified")
    if v is True:
        return OLD
    if not v:
        return "none"
    return str(v)


def _group_key(params: dict):
    # --check only adds the comparison with the CPU reference; the computation is the same.
    return json.dumps({k: v for k, v in params.items() if k not in ("mode", "check")}, sort_keys=True)


def cross_mode(cases: list, records: list):
    """Compares every application record's checksum with the explicit mode's of the same application and
    parameters. Returns (failed, upgraded): failed = {case_id: reason} for the cases that disagree;
    upgraded = ids of records (verified 'none') whose checksum agrees with explicit's, which become
    'cross-mode-checksum' (the explicit record too, when at least one other mode agrees with it)."""
    status = {c["case_id"]: c for c in cases}
    groups = {}
    for r in records:
        x = r.get("extra") or {}
        if r.get("op") != "app" or r.get("status") != "ok" or not x.get("checksum"):
            continue
        c = status.get(r.get("case_id"))
        if c is None or c.get("status") != "ok":
            continue
        params = c["params"] if isinstance(c["params"], dict) else json.loads(c["params"] or "{}")
        if params.get("processor") == "cpu" or x.get("mode") in (None, "cpu"):
            continue
        groups.setdefault((r.get("benchmark"), _group_key(params)), []).append(r)
    failed, upgraded = {}, []
    for recs in groups.values():
        base = [r for r in recs if r["extra"].get("mode") == "explicit"]
        if not base:
            continue
        want = base[0]["extra"]["checksum"]
        agree = []
        for r in recs:
            if r is base[0]:
                continue
            got = r["extra"]["checksum"]
            if got != want:
                failed[r["case_id"]] = (f"checksum {got} of mode {r['extra'].get('mode')} differs from the explicit "
                                        f"mode's {want} (same application and parameters)")
            else:
                agree.append(r)
        if agree:
            upgraded += [r["id"] for r in agree + base[:1] if method(r) == "none"]
    return failed, upgraded


def apply_cross_mode(store, run_id) -> dict:
    """Runs cross_mode over a run in the store and writes its verdicts; safe to repeat (resume)."""
    failed, upgraded = cross_mode(store.cases(run_id), store.records(run_id))
    for rid in upgraded:
        store.update_record_extra(rid, {"verified": "cross-mode-checksum"})
    for case_id, reason in failed.items():
        store.fail_case(run_id, case_id, reason)
    return failed


def section_methods(recs) -> dict:
    """{method: count} over the records of one report section."""
    out = {}
    for r in recs:
        m = method(r)
        out[m] = out.get(m, 0) + 1
    return out


def describe_methods(recs) -> str:
    """One line for a report section: how its data was verified."""
    counts = section_methods(recs)
    if not counts:
        return ""
    text = {"cpu-reference": "compared with the CPU's values", "cross-mode-checksum":
            "checksum equal to the explicit mode's", "invariant": "an invariant held (norm, chase, flag count)",
            "none": "not verified", OLD: "verified (method not recorded: an older store)"}
    return "Verified: " + "; ".join(f"{n} record{'s' if n != 1 else ''} {m} ({text.get(m, m)})"
                                   for m, n in sorted(counts.items(), key=lambda kv: -kv[1])) + "."
