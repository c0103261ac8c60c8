#!/usr/bin/env python3
"""Validation of the calibrated model (python/umscope/model/calibrated.py) on the GPU machine.

1. Measures the machine's figures with umscope's microbenchmarks at 256 MiB and 1 GiB (migration first
   pass, prefetch, GPU reads of pinned memory, first touch by kind, CPU faults on GPU-placed pages).
2. Runs every suite application in every mode that runs here at an in-memory footprint.
3. Predicts each non-explicit mode from the application's explicit run (the calibration: kernel time per
   iteration and the fixed phases) and the figures of step 1, then compares with the measurement; also
   predicts the 1 GiB first-touch and migration figures from the 256 MiB ones.
4. Writes the error table to docs/model-validation.md (or --out), with commit, machine and command.

    python3 bench/model_validate.py [--footprint 256M] [--apps a,b] [--out docs/model-validation.md]

Target: median |error| <= 10%, 90th percentile <= 25% over application x mode. About 4-5 minutes on an
H100 at the default footprint."""
import _commit  # bench/_commit.py
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from umscope import apps, native, probe
from umscope.model import calibrated, dos

ROOT = Path(__file__).resolve().parent.parent
MODES = ("explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered")


def umbench(bench, *args, timeout=300):
    recs, status = native.run_case(bench, *[str(a) for a in args], timeout=timeout)
    if status.get("status") != "ok":
        print(f"  {bench} {' '.join(map(str, args))}: {status.get('status')}: {status.get('reason')}", flush=True)
        return []
    return recs


def figures(size, dev):
    """Machine figures measured now at `size` bytes (calibrated.figures_from_records reads the records)."""
    recs = []
    for kind in ("managed,first_touch=cpu", "managed,first_touch=cpu,prefetch=gpu", "pinned"):
        recs += umbench("migration", "--kind", kind, "--bytes", size, "--iterations", "3", *dev)
    for kind, by in (("managed", "gpu"), ("managed", "cpu"), ("system", "cpu"), ("pinned", "cpu"),
                     ("registered", "cpu")):
        recs += umbench("firsttouch", "--kind", kind, "--by", by, "--bytes", size, "--reps", "3", *dev)
    recs += umbench("faults", "--kind", "managed,first_touch=gpu", "--processor", "cpu", "--mode", "parallel",
                    "--bytes", size, "--stride", "4K", "--reps", "3", *dev)
    recs += umbench("cpu-stream", "--kind", "system", "--bytes", size, "--threads", "all", "--reps", "5")
    return calibrated.figures_from_records(recs)


def run_app(name, footprint, mode, dev):
    app = apps.APPS[name]
    argv = [x for k, v in app.fixed.items() for x in (f"--{k}", v)] + ["--footprint", footprint, "--mode", mode,
                                                                       "--check", "0", *dev]
    recs = umbench(apps.bench_of(name), *argv, timeout=240)
    return recs[0] if recs else None


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--footprint", default="256M")
    ap.add_argument("--apps", default=",".join(a for a in calibrated.ACCESS if a in apps.APPS and a != "gemm"))
    ap.add_argument("--device", default="0")
    ap.add_argument("--out", default=str(ROOT / "docs" / "model-validation.md"))
    ap.add_argument("--json-out")
    a = ap.parse_args()
    t0 = time.time()
    fp = probe.probe_gpu()
    if not fp.get("gpus"):
        print(f"no GPU: {fp.get('why_no_gpu', 'none found')}", file=sys.stderr)
        return 2
    g = fp["gpus"][0]
    dev = ["--device", a.device]
    print(f"{g['name']}: measuring the machine's figures (256 MiB)", flush=True)
    fig, src = figures(256 << 20, dev)
    missing = {k: v for k, v in dos.figures("h100-sxm-pcie5")["figures"].items() if k not in fig}
    if missing:
        print(f"  not measured now, taken from the packaged H100 figures: {', '.join(sorted(missing))}", flush=True)
        fig = dict(missing, **fig)
    print("  " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(fig.items())), flush=True)

    rows = []
    for name in a.apps.split(","):
        meas = {m: run_app(name, a.footprint, m, dev) for m in MODES}
        cal = meas.get("explicit")
        if not cal:
            print(f"{name}: explicit run failed; no calibration", flush=True)
            continue
        for m in MODES[1:]:
            r = meas.get(m)
            if not r:
                continue
            p = calibrated.predict(name, m, cal, fig)
            err = (p["total_ms"] - r["total_ms"]) / r["total_ms"]
            rows.append({"app": name, "mode": m, "measured_ms": r["total_ms"], "predicted_ms": p["total_ms"],
                         "error": err, "phases_pred": {k: p[k] for k in calibrated.PHASES},
                         "phases_meas": {k: r.get(k) for k in calibrated.PHASES}})
            print(f"  {name:<11} {m:<17} measured {r['total_ms']:9.1f} ms  predicted {p['total_ms']:9.1f} ms  "
                  f"error {err:+7.1%}", flush=True)

    # Microbenchmarks: the 1 GiB figures predicted from the 256 MiB ones (linear in size).
    print("microbenchmarks: 1 GiB predicted from 256 MiB", flush=True)
    big, _ = figures(1 << 30, dev)
    micro = []
    for k in sorted(set(fig) & set(big)):
        if fig[k] and big[k]:
            micro.append({"figure": k, "at_256M": fig[k], "at_1G": big[k], "error": (fig[k] - big[k]) / big[k]})
            print(f"  {k:<32} 256M {fig[k]:10.3f}  1G {big[k]:10.3f}  error {micro[-1]['error']:+7.1%}", flush=True)

    errs = [abs(r["error"]) for r in rows]
    med, p90 = statistics.median(errs) if errs else float("nan"), pct(errs, 0.9)
    commit = _commit.commit(ROOT)
    cmd = "python3 bench/model_validate.py " + " ".join(sys.argv[1:])
    lines = [
        "# Calibrated model: predicted against measured (generated by bench/model_validate.py)", "",
        f"Machine: {g['name']} (device kind as run by the lead), driver/CUDA as probed; commit {commit}; "
        f"command `{cmd.strip()}`; {time.time() - t0:.0f} s. Model version {calibrated.VERSION}.", "",
        "Each application's explicit-mode run in the same session is the calibration (kernel time per "
        "iteration, context, CPU initialisation): it is not a prediction and is not in the table. Every other "
        "mode is predicted from it and the machine figures measured at the start of the session "
        "(256 MiB microbenchmarks), then measured.", "",
        f"**|error| over {len(errs)} application x mode cases: median {med:.1%}, 90th percentile {p90:.1%}** "
        f"(target: median <= 10%, p90 <= 25%: {'met' if med <= 0.10 and p90 <= 0.25 else 'missed'}).", "",
        "Figures: " + ", ".join(f"{k} {v:.4g}" for k, v in sorted(fig.items())) + ". Not measured in this "
        "session (packaged H100 figures): " + (", ".join(sorted(missing)) or "none") + ".", "",
        "| application | mode | measured ms | predicted ms | error |", "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {r['app']} | {r['mode']} | {r['measured_ms']:.1f} | {r['predicted_ms']:.1f} | {r['error']:+.1%} |"
              for r in rows]
    lines += ["", "Microbenchmarks: the 1 GiB figure predicted (linearly) from the 256 MiB one.", "",
              "| figure | 256 MiB | 1 GiB | error |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {m['figure']} | {m['at_256M']:.4g} | {m['at_1G']:.4g} | {m['error']:+.1%} |" for m in micro]
    Path(a.out).write_text("\n".join(lines) + "\n")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"rows": rows, "micro": micro, "figures": fig, "sources": src}))
    print(f"median |error| {med:.1%}, p90 {p90:.1%} over {len(errs)} cases; wrote {a.out} "
          f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
