"""The calibrated model of an application run: predicted time per phase in each memory mode.

Inputs
- a machine's figures (what umscope's microbenchmarks measure: copy and migration rates, the GPU's rate
  over the link, fault and first-touch costs, pinned/registered allocation costs) from figures/NAME.yaml
  (labelled: measured on a named machine, or `paper: ...`) or measured in the same session
  (bench/model_validate.py);
- the application's access profile: which fraction of its footprint the GPU reads from host-initialised
  inputs and which fraction comes back as results (ACCESS below, a table keyed by application, derived
  from the Use:: declarations in native/apps/*.cu), its GPU traffic and FLOPs per iteration (declared by
  the native application in its record: traffic_bytes, flops);
- the kernel time per iteration and the fixed phases (context, CPU initialisation) of the application's
  explicit-mode run on the same machine: the calibration. Explicit mode is therefore not a prediction and
  is left out of the error table.

Output: a `modelled` record per phase and mode, with the model version, every input and the validated
error where docs/model-validation.md gives one."""

VERSION = "calibrated-1"
GIB = float(1 << 30)

# Fractions of the footprint: (read by the GPU after CPU initialisation, written back as results). From the
# Use:: of each array in native/apps/*.cu (in, out, inout; scratch excluded).
ACCESS = {
    "triad": (2 / 3, 1 / 3), "conv2d": (1 / 2, 1 / 2), "jacobi2d": (1.0, 1.0), "mvt": (1.0, 0.0),
    "gesummv": (1.0, 0.0), "hotspot": (2 / 3, 2 / 3), "srad": (1.0, 1.0), "pathfinder": (1.0, 0.0),
    "needle": (1.0, 0.5), "bfs": (1.0, 0.2), "syr2k": (1.0, 1 / 3), "himeno": (1.0, 0.15), "sgemm": (2 / 3, 1 / 3),
    "gemm": (2 / 3, 1 / 3),
}
MODES = ("explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered", "system")
PHASES = ("context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms")


def _ms(nbytes, gbps):
    return nbytes / (gbps * 1e9) * 1e3 if gbps else 0.0


def predict(app: str, mode: str, calib: dict, fig: dict, ats=False) -> dict:
    """Predicted phases (ms) of `app` in `mode`. calib: the explicit-mode record of the same application
    and footprint (data_bytes, iterations, compute_ms, context_ms, alloc_ms, init_ms, back_ms, free_ms,
    traffic_bytes). fig: machine figures (see figures/*.yaml)."""
    if app not in ACCESS:
        raise KeyError(f"no access profile for {app!r}")
    fin, fout = ACCESS[app]
    D = float(calib.get("data_bytes") or calib["bytes"])  # the native record calls it bytes
    In, Out = fin * D, fout * D
    K = int(calib["iterations"])
    kern = calib["compute_ms"] / K
    T = float(calib.get("traffic_bytes") or 0.0)
    host_read = _ms(Out, fig.get("host_gbps"))  # the CPU's checksum read of the results
    p = {"context_ms": calib["context_ms"], "alloc_ms": calib["alloc_ms"], "init_ms": calib["init_ms"],
         "transfer_ms": 0.0, "compute_ms": K * kern, "back_ms": calib["back_ms"], "free_ms": calib["free_ms"]}
    explicit_back_copy = _ms(Out, fig.get("d2h_gbps"))
    back_cpu = max(0.0, calib["back_ms"] - explicit_back_copy)  # what the CPU does with the results
    managed_ft = fig.get("cpu_first_touch_ms_per_gib", 0.0) - fig.get("system_first_touch_ms_per_gib", 0.0)
    if mode == "explicit":
        p["transfer_ms"] = _ms(In, fig.get("h2d_gbps"))
    elif mode in ("managed", "managed-advice"):
        p["init_ms"] = calib["init_ms"] + max(0.0, managed_ft) * In / GIB
        p["compute_ms"] = K * kern + _ms(In, fig["first_pass_gbps"]) + fig.get("gpu_first_touch_ms_per_gib", 0.0) \
            * (D - In) / GIB
        p["back_ms"] = back_cpu + fig.get("cpu_fault_us_4k", 0.0) * 1e-3 * Out / 4096
    elif mode == "managed-prefetch":
        p["init_ms"] = calib["init_ms"] + max(0.0, managed_ft) * In / GIB
        p["transfer_ms"] = _ms(In, fig["migrate_gbps"]) + fig.get("gpu_first_touch_ms_per_gib", 0.0) * (D - In) / GIB
        p["back_ms"] = back_cpu + _ms(Out, fig.get("migrate_d2h_gbps", fig["migrate_gbps"]))
    elif mode in ("pinned", "registered"):
        p["alloc_ms"] = calib["alloc_ms"] + fig.get(f"{mode}_alloc_ms_per_gib", 0.0) * D / GIB
        p["free_ms"] = calib["free_ms"] + fig.get(f"{mode}_free_ms_per_gib", 0.0) * D / GIB
        p["compute_ms"] = K * max(kern, _ms(T, fig["remote_gbps"]))
        p["back_ms"] = back_cpu
    elif mode == "system":
        if not ats and not fig.get("ats"):
            raise ValueError("system mode needs HMM or ATS: not modelled on this machine")
        # Data stays where the CPU put it; the GPU reads it over the link (no counter migration modelled here:
        # `umscope simulate --policy ats` shows what the counters would move).
        p["compute_ms"] = K * max(kern, _ms(T, fig["remote_gbps"]))
        p["back_ms"] = back_cpu
    else:
        raise ValueError(f"unknown mode {mode!r}")
    p["total_ms"] = sum(p[k] for k in PHASES)
    p["host_read_ms"] = host_read
    return p


def record(app, mode, pred, fig_source, calib_source, error=None) -> dict:
    return {"type": "record", "family": "model", "status": "modelled", "model_version": VERSION,
            "app": app, "mode": mode, "phases_ms": {k: pred[k] for k in PHASES}, "total_ms": pred["total_ms"],
            "inputs": {"figures": fig_source, "calibration": calib_source, "access_profile": ACCESS.get(app)},
            "validated_error": error or "see docs/model-validation.md"}


def _flat(r) -> dict:
    d = dict(r.get("extra") or {})
    d.update({k: v for k, v in r.items() if k != "extra" and v is not None})
    return d


def figures_from_records(records) -> tuple:
    """Machine figures from umscope records (a run in the store, or umbench output): ({name: value},
    {name: which record}). Recognises the migration, firsttouch, faults and cpu-stream benchmarks."""
    fig, src = {}, {}
    best_threads = -1
    for r in map(_flat, records):
        b, op, kind, pol = r.get("benchmark"), r.get("op"), r.get("kind"), r.get("policy") or ""
        proc = str(r.get("processor") or "")
        nb = float(r.get("bytes") or 0)
        tag = f"{b} {op} {kind} {pol} {int(nb) >> 20} MiB".strip()
        if b == "migration" and op == "read" and not r.get("dos") and r.get("cpu_touch", "none") == "none":
            if kind == "managed" and "first_touch=cpu" in pol and "prefetch" not in pol and "advise" not in pol:
                fig["first_pass_gbps"], src["first_pass_gbps"] = r["first"], tag
            if kind == "managed" and "prefetch=gpu" in pol and r.get("prefetch_gbps"):
                for k in ("migrate_gbps", "h2d_gbps", "d2h_gbps"):
                    fig[k], src[k] = r["prefetch_gbps"], tag + " (prefetch rate)"
            if kind == "pinned":
                fig["remote_gbps"], src["remote_gbps"] = r["steady"], tag
        elif b == "firsttouch" and nb and r.get("median") is not None:
            gib = nb / GIB
            by_gpu = proc.startswith("gpu")
            if op == "first-touch" and kind == "managed":
                k = "gpu_first_touch_ms_per_gib" if by_gpu else "cpu_first_touch_ms_per_gib"
                fig[k], src[k] = r["median"] / gib, tag
            elif op == "first-touch" and kind == "system" and not by_gpu and "thp" not in pol:
                fig["system_first_touch_ms_per_gib"], src["system_first_touch_ms_per_gib"] = r["median"] / gib, tag
            elif op in ("alloc", "free") and kind in ("pinned", "registered"):
                k = f"{kind}_{op}_ms_per_gib"
                fig[k], src[k] = r["median"] / gib, tag
        elif (b == "faults" and op == "touch-parallel" and proc == "cpu" and kind == "managed"
              and int(r.get("stride") or 0) == 4096 and r.get("median") is not None):
            fig["cpu_fault_us_4k"], src["cpu_fault_us_4k"] = r["median"], tag
        elif b == "cpu-stream" and op == "read" and kind == "system" and r.get("median") is not None:
            if int(r.get("threads") or 0) > best_threads:
                best_threads = int(r.get("threads") or 0)
                fig["host_gbps"], src["host_gbps"] = r["median"], tag
    return fig, src
