"""How each record was verified, the cross-mode checksum check, and the failure of every record of a
kernel whose reference check failed.

A record's `verified` names the check that ran and passed, at the size the record ran, before it was
emitted; a check independent of the code under test:

  cpu-reference        every result compared with values the CPU computed (an application's CPU
                       reference, QV's CPU simulator, a benchmark's expected pattern)
  cpu-sample:N         N results recomputed exactly on the CPU from inputs it regenerates, or from the
                       state before the last iteration (stencils: the last iteration at sampled cells)
  freivalds:K          a matrix product checked as a whole by K random +-1 vectors (C r = A (B r))
  invariant[:NAME]     a property only the right result keeps (bfs-edges: BFS levels checked on every
                       edge; nw-recurrence: every cell of the alignment against its neighbours; norm;
                       chase-cycle; flag-count)
  cpu-layer:N          (QV beyond the CPU simulator) one layer of gates at the same width, in the same
                       buffer, from |0...0>: N amplitudes against the product state it must make
  none                 no check

Methods combine with '+' (freivalds:2+cpu-sample:51000; QV's invariant:norm+cpu-layer:N).

The cross-mode checksum (an application's result checksum equal to its explicit mode's in the same run)
is an extra check, recorded as extra `cross_mode_checksum`, never a method: every mode runs the same
kernel, so a wrong kernel agrees with itself.

Stores written before methods were named hold booleans: true reads as "unnamed (old store)", false or
missing as "none"; their "cross-mode-checksum" stays as written.
"""

import json

BASES = ("cpu-reference", "cpu-sample", "freivalds", "invariant", "cpu-layer", "cross-mode-checksum", "none")
METHODS = BASES  # the names a method is built from
OLD = "unnamed (old store)"
# Case parameters that choose another kernel of the same application (the rest change sizes or memory).
KERNEL_PARAMS = ("processor", "precision")
VERIFY_FAILED = "verification failed:"


def method(rec) -> str:
    """The verification method of a record (a store row with `extra`, or a flat record)."""
    v = rec.get("verified") if "verified" in rec else (rec.get("extra") or {}).get("verified")
    if v is True:
        return OLD
    if not v:
        return "none"
    return str(v)


def bases(m: str) -> list:
    """The checks a method names: 'freivalds:2+cpu-sample:9' -> ['freivalds', 'cpu-sample']."""
    return [part.split(":", 1)[0] for part in str(m).split("+")]


def is_method(m: str) -> bool:
    """Whether m is built from the known checks (and names one that is not 'none')."""
    b = bases(m)
    return all(x in BASES for x in b) and b != ["none"]


def _params(case) -> dict:
    p = case.get("params") or {}
    return p if isinstance(p, dict) else json.loads(p or "{}")


def _group_key(params: dict):
    # --check only chooses which reference runs; the computation is the same.
    return json.dumps({k: v for k, v in params.items() if k not in ("mode", "check")}, sort_keys=True)


def cross_mode(cases: list, records: list):
    """Compares every application record's checksum with the explicit mode's of the same application and
    parameters. Returns (failed, agreeing): failed = {case_id: reason} for the cases that disagree;
    agreeing = ids of records whose checksum equals explicit's (the explicit record too, when at least one
    other mode agrees with it)."""
    status = {c["case_id"]: c for c in cases}
    groups = {}
    for r in records:
        x = r.get("extra") or {}
        if r.get("op") != "app" or r.get("status") != "ok" or not x.get("checksum"):
            continue
        c = status.get(r.get("case_id"))
        if c is None or c.get("status") != "ok":
            continue
        params = _params(c)
        if params.get("processor") == "cpu" or x.get("mode") in (None, "cpu"):
            continue
        groups.setdefault((r.get("benchmark"), _group_key(params)), []).append(r)
    failed, agreeing = {}, []
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
            agreeing += [r["id"] for r in agree + base[:1]]
    return failed, agreeing


def kernel_key(case, defaults=None):
    """What identifies the kernel a case ran: its benchmark, the processor, and the parameters that choose
    another kernel (KERNEL_PARAMS; a parameter left out counts as its default, from `defaults`)."""
    params, defaults = _params(case), defaults or {}
    key = {k: params.get(k, defaults.get((case["benchmark"], k), "gpu" if k == "processor" else None))
           for k in KERNEL_PARAMS}
    return case["benchmark"], json.dumps(key, sort_keys=True)


def kernel_failures(cases: list, defaults=None) -> dict:
    """{case_id: reason} for every case still ok that ran the kernel of a case whose check against its
    reference failed (reason 'verification failed: ...'), in any mode or at any size: a kernel wrong in one
    case is wrong in all of them."""
    failed = {}
    for c in cases:
        if c.get("status") == "failed" and str(c.get("reason") or "").startswith(VERIFY_FAILED):
            failed.setdefault(kernel_key(c, defaults), c)
    out = {}
    for c in cases:
        bad = failed.get(kernel_key(c, defaults))
        if bad is not None and c.get("status") == "ok":
            why = str(bad["reason"])[len(VERIFY_FAILED):].strip()
            out[c["case_id"]] = (f"the same kernel failed its reference check in case {bad['case_id']!r}: "
                                 f"{why}")[:2000]
    return out


def _defaults() -> dict:
    """{(benchmark, option): default} of the native applications' KERNEL_PARAMS (`umbench list --json`)."""
    try:
        from umscope import registry
        return {(name, o["name"]): o["default"] for name, b in registry.applications().items()
                for o in b["options"] if o["name"] in KERNEL_PARAMS and o.get("default")}
    except Exception:  # noqa: BLE001 - no usable umbench: parameters as given
        return {}


def apply_checks(store, run_id) -> dict:
    """The run's checks after its cases ran, written into the store; safe to repeat (resume): the cross-mode
    checksum over every application, then every record of a kernel that failed a reference check marked
    failed. Returns {case_id: reason} of the cases failed here."""
    failed, agreeing = cross_mode(store.cases(run_id), store.records(run_id))
    for rid in agreeing:
        store.update_record_extra(rid, {"cross_mode_checksum": "agrees"})
    for case_id, reason in failed.items():
        store.fail_case(run_id, case_id, reason)
    by_kernel = kernel_failures(store.cases(run_id), _defaults())
    for case_id, reason in by_kernel.items():
        store.fail_case(run_id, case_id, reason)
    return dict(failed, **by_kernel)


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
    return "Verified: " + "; ".join(f"{n} record{'s' if n != 1 else ''} {m} ({describe(m)})"
                                   for m, n in sorted(counts.items(), key=lambda kv: -kv[1])) + "."


TEXT = {"cpu-reference": "compared with the CPU's values",
        "cpu-sample": "results recomputed on the CPU",
        "freivalds": "product checked by random vectors",
        "invariant": "an invariant held",
        "cpu-layer": "one layer at the same width against its exact product state",
        "cross-mode-checksum": "checksum equal to the explicit mode's (an older store)",
        "none": "not verified", OLD: "verified (method not recorded: an older store)"}


def describe(m: str) -> str:
    """A method in words: 'freivalds:2+cpu-sample:9' -> 'product checked by random vectors; results recomputed
    on the CPU'."""
    if m in TEXT:
        return TEXT[m]
    return "; ".join(TEXT.get(b, b) for b in bases(m))
