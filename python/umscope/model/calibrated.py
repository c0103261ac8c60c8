"""The calibrated model of an application run: predicted time per phase in each memory mode.

Inputs
- a machine's figures (what umscope's microbenchmarks measure: copy and migration rates, the GPU's rate
  over the link, fault and first-touch costs, pinned/registered allocation costs) from figures/NAME.yaml
  (labelled: measured on a named machine, or `paper: ...`) or measured in the same session
  (bench/model_validate.py);
- the application's access profile: which fraction of its footprint the GPU reads from host-initialised
  inputs and which fraction comes back as results (ACCESS below, keyed by application: the fractions each
  application declares in its registration, native/apps/*.cu, read through model/apps.py), its GPU traffic and FLOPs per iteration (declared by
  the native application in its record: traffic_bytes, flops);
- the kernel time per iteration and the fixed phases (context, CPU initialisation) of the application's
  explicit-mode run on the same machine: the calibration. Explicit mode is therefore not a prediction and
  is left out of the error table.

Output: a `modelled` record per phase and mode, with the model version, every input and the validated
error where docs/model-validation.md gives one."""

import json
from pathlib import Path

from umscope.model import apps as model_apps

VERSION = "calibrated-5"
# The validated error, written by bench/model_validate.py (key "calibrated") and bench/sim_validate.py (key
# "umsim") when they regenerate docs/model-validation.md and docs/simulator-validation.md.
VALIDATED = Path(__file__).with_name("validated.json")
GIB = float(1 << 30)

# Fractions of the footprint: (read by the GPU after CPU initialisation, written back as results). The
# fallback where a record does not declare its arrays (records before calibrated-2); the applications
# now report in_bytes, out_bytes, inout_bytes and arrays (name:use:bytes) themselves (native/apps/app.cu).
MODES = ("explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered", "system")
PHASES = ("context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms")


def __getattr__(name):
    # ACCESS: {application: (read, written) fractions}, from the applications' registered facts (model/apps.py),
    # read when first used, not at import.
    if name == "ACCESS":
        return model_apps.access()
    raise AttributeError(name)

# What calibrates what (every figure is a microbenchmark record of the same machine; figures_from_records
# names the record): the phase each figure predicts.
CALIBRATES = {
    "system_first_touch_ms_per_gib": "init: what explicit's CPU initialisation pays for first-touching pageable pages",
    "cpu_first_touch_ms_per_gib": "init (managed modes): the CPU first-touching managed pages instead",
    "pinned_first_touch_ms_per_gib": "init (pinned): the CPU's first write of pinned pages (resident since allocation)",
    "registered_first_touch_ms_per_gib": "init (registered): the same for registered pages",
    "first_pass_gbps": "compute (managed): demand migration of one CPU-initialised array on the GPU's first pass",
    "first_pass2_gbps": "compute (managed): the same with two arrays migrating at once (kernels streaming several "
                        "inputs)",
    "gpu_first_touch_ms_per_gib": "compute (managed): never-touched (output) pages populated by GPU faults",
    "migrate_gbps": "transfer (managed-prefetch): prefetch of CPU-initialised pages to the GPU",
    "populate_prefetch_gbps": "transfer (managed-prefetch): prefetch of never-touched pages (outputs)",
    "migrate_d2h_gbps": "back (managed-prefetch): prefetch of the results to the CPU",
    "advise_read_mostly_ms_per_gib": "transfer (managed-advice): cudaMemAdvise read-mostly on CPU-initialised inputs "
                                     "(the migration benchmark's advise_ms)",
    "advise_preferred_gpu_ms_per_gib": "transfer (managed-advice): preferred location GPU on CPU-initialised arrays",
    "read_mostly_first_pass_gbps": "compute (managed-advice): first pass over read-mostly inputs",
    "preferred_gpu_first_pass_gbps": "compute (managed-advice): first pass over preferred-GPU in/out arrays",
    "remote_gbps": "compute (pinned, registered): the GPU reading host memory over the link",
    "remote_write_gbps": "compute (pinned, registered): the GPU writing host memory over the link",
    "remote_copy_gbps": "compute (pinned, registered): reading one pinned array while writing another (both "
                        "directions of the link at once)",
    "remote_gather_gops": "compute (pinned, registered): random 8-byte loads of pinned memory per second (gpu-stream "
                          "gather): each separate run of bytes a kernel reads over the link (link_runs, bfs's "
                          "gather_accesses) is one such remote access",
    "remote_scatter_gops": "compute (pinned, registered): random 8-byte stores to pinned memory per second (gpu-stream "
                           "scatter): bfs's scatter_accesses",
    "remote_gather_scatter_gops": "compute (pinned, registered): a random load and a random store at once, pairs per "
                                  "second (gpu-stream gather-scatter): loads and stores of the same run overlap at "
                                  "this rate",
    "cpu_fault_us_4k": "back (managed, managed-advice): the CPU faulting the results back, per 4 KiB page",
    "checksum_gbps": "back (every mode): the CPU's checksum over the results",
    "pinned_alloc_ms_per_gib": "alloc (pinned)", "pinned_free_ms_per_gib": "free (pinned)",
    "registered_alloc_ms_per_gib": "alloc (registered)", "registered_free_ms_per_gib": "free (registered)",
    "managed_free_gpu_ms_per_gib": "free (managed modes): freeing managed pages the CPU initialised and the GPU "
                                   "migrated (firsttouch --by gpu --pretouch cpu)",
    "system_free_ms_per_gib": "free: what explicit pays for freeing its pageable host copies",
}


# The CPU's first write per kind, in the figures' names: what each mode's CPU initialisation pays where
# explicit's (pageable, "system") pays system_first_touch.
CPU_TOUCH_KINDS = {"managed": "cpu", "system": "system", "pinned": "pinned", "registered": "registered"}


def _ms(nbytes, gbps):
    return nbytes / (gbps * 1e9) * 1e3 if gbps else 0.0


def profile(app: str, calib: dict) -> dict:
    """The access profile: bytes the CPU initialises (in + inout), bytes read back (out + inout), never
    touched before the GPU writes them (out), and the large arrays migrating on the GPU's first pass."""
    D = float(calib.get("data_bytes") or calib.get("bytes") or 0)
    if calib.get("in_bytes") is not None and calib.get("out_bytes") is not None:
        i, o, x = (float(calib.get(k) or 0) for k in ("in_bytes", "out_bytes", "inout_bytes"))
        arrays = []
        for a in str(calib.get("arrays") or "").split(","):
            parts = a.rsplit(":", 2)
            if len(parts) == 3 and parts[2].isascii() and parts[2].isdigit():
                arrays.append((parts[1], int(parts[2])))
        big_in = sum(1 for u, b in arrays if u != "out" and b >= 0.1 * D) if arrays else 1
        src = "declared by the application (in_bytes, out_bytes, inout_bytes, arrays)"
    else:
        access = model_apps.access()
        if app not in access:
            raise KeyError(f"no access profile for {app!r}")
        fin, fout = access[app]
        i, o, x = fin * D, fout * D, 0.0
        big_in = 1
        src = "calibrated.ACCESS (fractions of the footprint)"
    return {"D": D, "in": i, "out": o, "inout": x, "cpu_init": i + x, "results": o + x, "untouched": o,
            "concurrent_inputs": big_in, "source": src}


def calibration(explicit_records) -> dict:
    """The calibration from one or more explicit-mode records of the same application and footprint:
    each phase's median (the first record's other fields)."""
    recs = [r for r in explicit_records if r]
    if not recs:
        return {}
    out = dict(recs[0])
    for k in PHASES + ("total_ms",):
        v = sorted(float(r[k]) for r in recs if r.get(k) is not None)
        if v:
            out[k] = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    # The per-iteration kernel times of the run whose compute time is the median: the first iteration's
    # excess over the others' median is a one-time cost (module loading, cuBLAS's first call), paid once
    # in every mode and not per iteration.
    with_samples = sorted((r for r in recs if r.get("samples") and r.get("compute_ms") is not None),
                          key=lambda r: float(r["compute_ms"]))
    if with_samples:
        out["samples"] = list(with_samples[len(with_samples) // 2]["samples"])
    out["calibration_runs"] = len(recs)
    return out


def kernel_times(calib: dict):
    """(one-time cost of the first iteration, [each iteration's kernel time without it]) from the
    explicit run's per-iteration samples; without samples, compute_ms spread evenly."""
    K = int(calib["iterations"])
    s = [float(x) for x in (calib.get("samples") or [])]
    if len(s) != K or K < 2:
        return 0.0, [calib["compute_ms"] / K] * K
    rest = sorted(s[1:])
    med = rest[len(rest) // 2] if len(rest) % 2 else (rest[len(rest) // 2 - 1] + rest[len(rest) // 2]) / 2
    warm = max(0.0, s[0] - med)
    return warm, [s[0] - warm] + s[1:]


class _Asked(dict):
    """Machine figures that remember which of the figures asked for were missing."""

    def __init__(self, fig):
        super().__init__(fig)
        self.missing = set()

    def get(self, key, default=None):
        if key not in self and key != "ats":  # "ats" is a property of the machine, not a figure
            self.missing.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        if key not in self:
            self.missing.add(key)
        return super().__getitem__(key)


def predict(app: str, mode: str, calib: dict, fig: dict, ats=False) -> dict:
    """Predicted phases (ms) of `app` in `mode`. calib: the explicit-mode record of the same application
    and footprint (or calibration() of several): kernel time per iteration, context, allocation, CPU
    initialisation and free as measured there. fig: machine figures (see CALIBRATES and figures/*.yaml);
    a figure missing from fig falls back as noted inline, and the result names it (figures_missing)."""
    fig = _Asked(fig)
    p = _predict(app, mode, calib, fig, ats)
    if mode != "explicit":
        p["figures_missing"] = sorted(fig.missing)
    return p


def _predict(app: str, mode: str, calib: dict, fig: dict, ats=False) -> dict:
    a = profile(app, calib)
    D, init_b, res_b, untouched = a["D"], a["cpu_init"], a["results"], a["untouched"]
    K = int(calib["iterations"])
    kern = calib["compute_ms"] / K
    T = float(calib.get("traffic_bytes") or 0.0)
    ft = lambda key, nbytes: fig.get(key, 0.0) * nbytes / GIB  # noqa: E731
    checksum = _ms(res_b, fig.get("checksum_gbps") or fig.get("host_gbps"))
    sys_ft = ft("system_first_touch_ms_per_gib", init_b)
    p = {"context_ms": calib["context_ms"], "alloc_ms": calib["alloc_ms"], "init_ms": calib["init_ms"],
         "transfer_ms": calib.get("transfer_ms", 0.0), "compute_ms": K * kern, "back_ms": calib["back_ms"],
         "free_ms": calib["free_ms"]}
    if mode == "explicit":
        return dict(p, total_ms=sum(p[k] for k in PHASES))
    # Allocation and free of the mode's own kind, from the firsttouch benchmark of that kind (explicit's
    # cudaMalloc/cudaFree and pageable host copies are not part of any other mode); without the figure,
    # explicit's own phase.
    def kind_phase(key, phase):
        return ft(key, D) if fig.get(key) else calib[phase]

    # The CPU's initialisation: explicit's, plus what the mode's kind costs the CPU's first write beyond
    # pageable memory (both measured writing the applications' values at their footprint); a missing figure
    # counts 0 (pinned and registered pages are resident from allocation).
    def init_as(key):
        return max(0.0, calib["init_ms"] + ft(key, init_b) - sys_ft)
    if mode.startswith("managed"):
        p["init_ms"] = init_as("cpu_first_touch_ms_per_gib")
        p["transfer_ms"] = 0.0
        p["free_ms"] = kind_phase("managed_free_gpu_ms_per_gib", "free_ms")
        fp = fig.get("first_pass2_gbps") if a["concurrent_inputs"] >= 2 else None
        fp = fp or fig["first_pass_gbps"]
        fault_back = fig.get("cpu_fault_us_4k", 0.0) * 1e-3 * res_b / 4096
        if mode == "managed":
            p["compute_ms"] = K * kern + _ms(init_b, fp) + ft("gpu_first_touch_ms_per_gib", untouched)
            p["back_ms"] = fault_back + checksum
        elif mode == "managed-prefetch":
            p["transfer_ms"] = _ms(init_b, fig["migrate_gbps"]) + (
                _ms(untouched, fig["populate_prefetch_gbps"]) if fig.get("populate_prefetch_gbps")
                else ft("gpu_first_touch_ms_per_gib", untouched))
            p["back_ms"] = _ms(res_b, fig.get("migrate_d2h_gbps") or fig["migrate_gbps"]) + checksum
        else:  # managed-advice: inputs read-mostly, outputs and in/out arrays preferred on the GPU
            p["transfer_ms"] = ft("advise_read_mostly_ms_per_gib", a["in"]) + \
                ft("advise_preferred_gpu_ms_per_gib", a["inout"])
            p["compute_ms"] = K * kern + _ms(a["in"], fig.get("read_mostly_first_pass_gbps") or fp) + \
                _ms(a["inout"], fig.get("preferred_gpu_first_pass_gbps") or fp) + \
                ft("gpu_first_touch_ms_per_gib", untouched)
            p["back_ms"] = fault_back + checksum
    elif mode in ("pinned", "registered", "system"):
        if mode == "system" and not ats and not fig.get("ats"):
            raise ValueError("system mode needs HMM or ATS: not modelled on this machine")
        if mode != "system":
            # pinned and registered pages are resident from allocation: the initialisation writes them without
            # faulting, at the rate the CPU writes that kind the first time after allocation (firsttouch)
            p["init_ms"] = init_as(f"{mode}_first_touch_ms_per_gib")
            p["alloc_ms"] = kind_phase(f"{mode}_alloc_ms_per_gib", "alloc_ms")
            p["free_ms"] = kind_phase(f"{mode}_free_ms_per_gib", "free_ms")
        p["transfer_ms"] = 0.0
        lk = link_terms(calib, a, fig)
        warm, kerns = kernel_times(calib)
        # Each iteration takes the longer of its kernel time and the link's; the first call's one-time cost
        # and the random accesses the application counts over its whole run (bfs) come on top.
        p["compute_ms"] = warm + sum(max(k, lk["per_iteration_ms"]) for k in kerns) + lk["random_ms"]
        p["link"] = lk
        p["back_ms"] = checksum
    else:
        raise ValueError(f"unknown mode {mode!r}")
    p["total_ms"] = sum(p[k] for k in PHASES)
    p["profile"] = a
    return p


def link_terms(calib: dict, a: dict, fig: dict) -> dict:
    """What the kernels move over the link when the arrays are remote (pinned, registered), per
    iteration, and its time. Bytes: link_read_bytes and link_write_bytes where the application declares
    them (what its kernels read and write of the remote arrays, re-reads included); else link_bytes
    (tiled kernels: what the tiles re-read) or traffic_bytes, split as the arrays the GPU reads (in,
    inout) and writes (out, inout). Time: a roofline of the link: reads at the GPU's read rate of host
    memory, writes at its write rate, both together at the rate of a kernel reading one pinned array
    while writing another (remote_copy_gbps), and the separate runs of bytes the kernels read
    (link_runs: a tile's rows, each in its own page) at the rate of random remote loads
    (remote_gather_gops). Random accesses counted over the whole run (gather_accesses,
    scatter_accesses: bfs) at the gather and scatter rates, as many as pair up at the rate of both at
    once (random_ms), added once."""
    T = float(calib.get("traffic_bytes") or 0.0)
    if calib.get("link_read_bytes") is not None and calib.get("link_write_bytes") is not None:
        R, W = float(calib["link_read_bytes"]), float(calib["link_write_bytes"])
        src = "link_read_bytes, link_write_bytes (declared)"
    else:
        L = float(calib.get("link_bytes") or T)
        rd, wr = a["in"] + a["inout"], a["out"] + a["inout"]
        rf = rd / (rd + wr) if rd + wr else 1.0
        R, W = L * rf, L * (1 - rf)
        src = ("link_bytes" if calib.get("link_bytes") else "traffic_bytes") + " split by the arrays' use"
    runs = float(calib.get("link_runs") or 0.0)
    g = fig.get("remote_gather_gops")
    s = fig.get("remote_scatter_gops") or g
    terms = {"read": _ms(R, fig["remote_gbps"]), "write": _ms(W, fig.get("remote_write_gbps") or fig["remote_gbps"]),
             "both": _ms(R + W, fig.get("remote_copy_gbps")),
             "runs": runs / (g * 1e9) * 1e3 if g and runs else 0.0}
    bound = max(terms, key=terms.get)
    ga, sa = float(calib.get("gather_accesses") or 0.0), float(calib.get("scatter_accesses") or 0.0)
    rnd = random_ms(ga, sa, g, s, fig.get("remote_gather_scatter_gops"))
    return {"read_bytes": R, "write_bytes": W, "runs": runs, "source": src, "terms_ms": terms, "bound": bound,
            "per_iteration_ms": terms[bound], "gather_accesses": ga, "scatter_accesses": sa, "random_ms": rnd}


def random_ms(loads, stores, g, s, pair):
    """Time (ms) of `loads` random remote loads and `stores` random remote stores in one run: as many of
    them as pair up at the rate of both at once (`pair`, loads and stores per second each), the rest at
    their own rate (`g`, `s`, G/s); without the paired rate, one after the other. 0 without g."""
    if not g:
        return 0.0
    s = s or g
    if not pair:
        return (loads / g + stores / s) * 1e-6
    both = min(loads, stores)
    return (both / pair + (loads - both) / g + (stores - both) / s) * 1e-6


def validated(kind="calibrated", app=None, mode=None, version=None) -> dict:
    """The validated error of a model (kind "calibrated" or "umsim") as its validation script last wrote it:
    the suite's median and 90th-percentile |error|, where, when and at which commit; with app and mode, this
    case's own error. Says so when there is none or it was for another model version (version: one, or a tuple of
    those whose figures hold, the first named in the note)."""
    try:
        v = json.loads(VALIDATED.read_text()).get(kind)
    except (OSError, ValueError):
        v = None
    doc = "docs/simulator-validation.md" if kind == "umsim" else "docs/model-validation.md"
    if not v:
        return {"status": "not validated yet", "source": doc}
    out = {k: v[k] for k in v if k != "per_case"}
    out["source"] = doc
    if app and mode:
        out["this_case"] = (v.get("per_case") or {}).get(f"{app}/{mode}")
    want = version or (VERSION if kind.startswith("calibrated") else None)
    want = (want,) if isinstance(want, str) else want
    if want and v.get("model_version") not in want:
        out["note"] = f"validated for {v.get('model_version')}, not {want[0]}"
    return out


def validated_model(app=None, mode=None, packaged=False) -> dict:
    """The calibrated model's validated error for predictions made with the session's own figures, or with
    the packaged ones (packaged=True: `umscope model` without --figures, the report's modelled section), whose
    error bench/model_validate.py --packaged-figures measures on a held-out run ("calibrated_packaged").
    Without that entry, the session-figures error with a note saying it is not for these figures."""
    if packaged:
        v = validated("calibrated_packaged", app, mode)
        if "median" in v:
            return v
        v = validated("calibrated", app, mode)
        if "median" in v:
            v["note"] = ("validated with the session's own figures, not with the packaged ones used here"
                         + (f"; {v['note']}" if v.get("note") else ""))
        return v
    return validated("calibrated", app, mode)


def validated_text(v: dict) -> str:
    """One line for people: the validated error and where it comes from."""
    if v.get("status"):
        return f"validated error: {v['status']} (see {v['source']})"
    if "median" in v:
        t = (f"validated error (predicted vs measured total time, {v.get('cases')} cases on {v.get('machine')}, "
             f"commit {v.get('commit')}" + (f", with {v['figures']}" if v.get("figures") else "")
             + f"): median {v['median']:.1%}, 90th percentile {v['p90']:.1%}")
        if v.get("this_case") is not None:
            t += f"; this case {v['this_case']:+.1%}"
    else:
        t = _counts_text(v)
    t += f" ({v['source']})"
    return t + (f"; {v['note']}" if v.get("note") else "")


_META = ("model_version", "machine", "commit", "when", "cases", "source", "note", "status", "this_case")


def _counts_text(v: dict) -> str:
    """The simulator's validation in words: per counted quantity (keys `QTY_max_error_vs_REF[_SET]` and
    `QTY_within_10pct[_SET]` as bench/sim_validate.py writes them), how many cases fall within +-10% and the
    worst |error| against each reference, as percentages. It validates counts, not times: says so."""
    groups = {}
    for k, x in v.items():
        if k in _META:
            continue
        if "_max_error_vs_" in k:
            q, rest = k.split("_max_error_vs_", 1)
            groups.setdefault(q, []).append(f"worst |error| {x:.1%} against {rest.replace('_', ' ')}"
                                            if isinstance(x, (int, float)) else f"{rest.replace('_', ' ')} {x}")
        elif "_within_10pct" in k:
            q, rest = k.split("_within_10pct", 1)
            groups.setdefault(q, []).append(f"within +-10% in {x}" + (f" ({rest.strip('_')})" if rest.strip("_")
                                                                       else ""))
        else:
            groups.setdefault(k, []).append(str(x))
    parts = [f"{q.replace('_', ' ')}: " + ", ".join(sorted(items, key=lambda i: not i.startswith("within")))
             for q, items in groups.items()]
    return (f"validated counts ({v.get('model_version')} against {v.get('machine')}, commit {v.get('commit')}): "
            + "; ".join(parts)
            + "; its modelled times are not validated against measured times")


def record(app, mode, pred, fig_source, calib_source, error=None) -> dict:
    return {"type": "record", "family": "model", "status": "modelled", "model_version": VERSION,
            "app": app, "mode": mode, "phases_ms": {k: pred[k] for k in PHASES}, "total_ms": pred["total_ms"],
            "inputs": {"figures": fig_source, "calibration": calib_source,
                       "figures_missing": pred.get("figures_missing") or [],
                       "access_profile": {k: v for k, v in (pred.get("profile") or {}).items()}},
            "validated_error": error or validated("calibrated", app, mode)}


def write_validated(kind: str, entry: dict, path=None):
    """Stores a validation script's result under `kind` in validated.json (the other kind kept)."""
    path = Path(path or VALIDATED)
    try:
        cur = json.loads(path.read_text())
    except (OSError, ValueError):
        cur = {}
    cur[kind] = entry
    path.write_text(json.dumps(cur, indent=1, sort_keys=True) + "\n")


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _flat(r) -> dict:
    d = dict(r.get("extra") or {})
    d.update({k: v for k, v in r.items() if k != "extra" and v is not None})
    return d


def _policy(text) -> dict:
    out = {}
    for item in str(text or "").split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def check_calibration(rec: dict, where: str) -> dict:
    """An explicit-mode record as the model computes with it: its phases and compute time finite numbers of at
    least 0, its iterations a whole number from 1, its samples (if any) one per iteration; UsageError naming
    what is wrong (the record's field types are checked by inputs.check_record when it is read)."""
    from umscope import inputs
    from umscope.errors import UsageError
    inputs.check_record(rec, where)
    missing = [k for k in PHASES if k != "transfer_ms" and rec.get(k) is None] + \
        (["iterations"] if rec.get("iterations") is None else [])
    if missing:
        raise UsageError(f"{where}: the explicit-mode record of {rec.get('app')} has no {', '.join(missing)}")
    it = rec["iterations"]
    if it != int(it) or not 1 <= it <= 1e9:
        raise UsageError(f"{where}: iterations must be a whole number from 1, got {it}")
    return rec


def checked_figures(records, where: str) -> dict:
    """figures_from_records' figures, each a finite number of at least 0 and every rate (GB/s, G/s) above 0:
    a rate of 0 would divide the model's times by 0; UsageError naming the figure and its record."""
    from umscope import inputs
    from umscope.errors import UsageError
    for i, r in enumerate(records, 1):
        inputs.check_record(_flat(r), f"{where}: record {i}")
    fig, src = figures_from_records(records)
    for k, v in fig.items():
        rate = k.endswith(("_gbps", "_gops"))
        try:
            inputs.need_number(v, k, positive=rate)
        except UsageError as e:
            raise UsageError(f"{where}: {e} (from {src.get(k, '?')})") from None
    return fig


def figures_from_records(records) -> tuple:
    """Machine figures from umscope records (a run in the store, or umbench output): ({name: value},
    {name: which record}). Recognises the migration, firsttouch, faults, cpu-stream and copy benchmarks
    (bench/model_validate.py runs the set; CALIBRATES says which phase each figure predicts)."""
    fig, src = {}, {}
    vals = {}  # every value of a figure: repeated trials and repetitions give their median
    best_threads = {}
    touch_rank = {}
    place = {}
    records = [_flat(r) for r in records]
    # the firsttouch records' largest thread count: the applications' (all the CPUs); fewer is a sweep
    max_threads = {"firsttouch": max([int(r.get("threads") or 0) for r in records
                                      if r.get("benchmark") == "firsttouch"] or [0])}
    for r in records:
        b, op, kind = r.get("benchmark"), r.get("op"), r.get("kind")
        pol = _policy(r.get("policy"))
        nb = float(r.get("bytes") or 0)
        gib = nb / GIB if nb else 0
        tag = f"{b} {op} {kind} {r.get('policy') or ''} {int(nb) >> 20} MiB".replace("  ", " ")

        def put(k, v, note=""):
            if v is not None:
                vals.setdefault(k, []).append(float(v))
                fig[k] = _median(vals[k])
                src[k] = tag + note + (f" (median of {len(vals[k])})" if len(vals[k]) > 1 else "")
        if b == "migration" and not r.get("dos") and r.get("cpu_touch", "none") == "none":
            ft, pf, adv = pol.get("first_touch", "cpu"), pol.get("prefetch"), pol.get("advise")
            if kind == "managed" and ft == "cpu" and not pf:
                if r.get("place_ms") is not None and gib and op == "read" and (adv or "") not in place:
                    place[adv or ""] = (r["place_ms"] / gib, tag)
                if adv in ("read_mostly", "preferred:gpu") and r.get("advise_ms") is not None and gib:
                    put("advise_" + adv.replace(":", "_") + "_ms_per_gib", r["advise_ms"] / gib, " (advise_ms)")
                if op == "read" and not adv:
                    put("first_pass_gbps", r.get("first"))
                elif op == "copy" and not adv:
                    put("first_pass2_gbps", r.get("first"))
                elif op == "read" and adv == "read_mostly":
                    put("read_mostly_first_pass_gbps", r.get("first"))
                elif op == "read" and adv == "preferred:gpu":
                    put("preferred_gpu_first_pass_gbps", r.get("first"))
            elif kind == "managed" and pf == "gpu" and ft == "cpu" and not adv:
                put("migrate_gbps", r.get("prefetch_gbps"), " (prefetch rate)")
            elif kind == "managed" and pf == "gpu" and ft == "none":
                put("populate_prefetch_gbps", r.get("prefetch_gbps"), " (prefetch rate)")
            elif kind == "managed" and pf == "cpu" and ft == "gpu":
                put("migrate_d2h_gbps", r.get("prefetch_gbps"), " (prefetch rate)")
            elif kind == "pinned" and op == "read":
                put("remote_gbps", r.get("steady"))
            elif kind == "pinned" and op == "write":
                put("remote_write_gbps", r.get("steady"))
            elif kind == "pinned" and op == "copy":
                put("remote_copy_gbps", r.get("steady"))
        elif b == "firsttouch" and gib and r.get("median") is not None:
            by_gpu = str(r.get("by") or r.get("processor") or "").startswith("gpu")
            thp = pol.get("page") == "thp"
            pretouched = str(r.get("pretouch") or "none") != "none"
            cpu_touch = op == "first-touch" and not by_gpu and not thp and kind in CPU_TOUCH_KINDS
            if cpu_touch and int(r.get("threads") or 0) not in (0, max_threads.get("firsttouch", 0)):
                pass  # a thread-count sweep: the applications initialise with all the threads
            elif cpu_touch:
                # The CPU's first write of a kind: the applications' own pattern (values=hash: their generator,
                # all threads) where measured, else a constant stream (records before calibrated-5).
                key = f"{CPU_TOUCH_KINDS[kind]}_first_touch_ms_per_gib"
                rank = 1 if r.get("values") == "hash" else 0
                if rank > touch_rank.get(key, -1):
                    touch_rank[key] = rank
                    vals.pop(key, None)
                if rank == touch_rank[key]:
                    put(key, r["median"] / gib, " (values=hash: the applications' initialisation)" if rank else "")
            elif op == "first-touch" and kind == "managed" and by_gpu and not pretouched:
                put("gpu_first_touch_ms_per_gib", r["median"] / gib)
            elif op in ("alloc", "free") and kind in ("pinned", "registered", "system") and not thp:
                put(f"{kind}_{op}_ms_per_gib", r["median"] / gib)
            elif op == "free" and kind == "managed" and by_gpu:
                # Freeing managed memory the GPU holds: pages the CPU initialised and the GPU's pass migrated
                # (--pretouch cpu: as the applications' arrays are) where measured, else pages the GPU
                # populated itself.
                rank = 1 if pretouched else 0
                if rank > touch_rank.get("managed_free_gpu_ms_per_gib", -1):
                    touch_rank["managed_free_gpu_ms_per_gib"] = rank
                    vals.pop("managed_free_gpu_ms_per_gib", None)
                if rank == touch_rank["managed_free_gpu_ms_per_gib"]:
                    put("managed_free_gpu_ms_per_gib", r["median"] / gib,
                        " (CPU-initialised, migrated by the GPU's first pass)" if rank else "")
        elif (b == "faults" and op == "touch-parallel" and str(r.get("processor")) == "cpu" and kind == "managed"
              and int(r.get("stride") or 0) == 4096 and r.get("median") is not None):
            put("cpu_fault_us_4k", r["median"])
        elif b == "cpu-stream" and kind == "system" and op in ("read", "checksum") and r.get("median") is not None:
            key = "host_gbps" if op == "read" else "checksum_gbps"
            th = int(r.get("threads") or 0)
            if th > best_threads.get(key, -1):
                best_threads[key] = th
                vals.pop(key, None)
            if th == best_threads[key]:
                put(key, r["median"])
        elif (b == "gpu-stream" and kind == "pinned" and op in ("gather", "scatter", "gather-scatter", "reread")
              and r.get("median") is not None):
            if op == "reread" and r.get("window"):
                # the working-set sweep: re-reading a window of pinned memory (L2 reuse of host lines)
                put(f"remote_reread_{int(r['window']) >> 20}m_gbps", r["median"])
            elif op in ("gather", "scatter", "gather-scatter") and nb >= 64 * (1 << 20):
                put(f"remote_{op.replace('-', '_')}_gops", r["median"])
        elif b == "copy" and op == "ce-copy" and r.get("direction") == "uni" and r.get("median") is not None:
            if kind == "system" and r.get("dst_kind") == "device":
                put("h2d_gbps", r["median"])
            elif kind == "device" and r.get("dst_kind") == "system":
                put("d2h_gbps", r["median"])
    for adv, key in (("read_mostly", "advise_read_mostly_ms_per_gib"), ("preferred:gpu", "advise_preferred_gpu_ms_per_gib")):
        if adv in place and "" in place and key not in fig:  # older records: no advise_ms of its own
            fig[key] = max(0.0, place[adv][0] - place[""][0])
            src[key] = f"place_ms per GiB of `{place[adv][1]}` minus that of `{place[''][1]}`"
    return fig, src
