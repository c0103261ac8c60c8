"""The model against the published GH200 figures: validation against published figures on hardware not lent
here. Every published value comes from the packaged transcriptions (reference/gh200.yaml's `values`, and
model/reference/published.yaml's fusco2024_fig5 and schieffer2024_* entries), each with its citation; every
prediction is the model's own (model/figures/gh200.yaml priced by the simulator's datapath rules, and the
simulator's Schieffer sweep, model/dos.py). bench/gh200_published.py writes docs/model-gh200.md from cells().
"""

import statistics

from umscope.model import dos

# What the model has no mechanism for, named once (the reasons cells miss or cannot be predicted).
MISSING = {
    "host_copy": ("cudaMemcpy's CPU-driven path: the driver copies with the CPU whenever neither side is device or "
                  "managed memory (Fusco et al. Sec. II: 'the slower host-based implementation is used for all system "
                  "allocated memory'); the model prices every copy by its datapath (host_gbps / 2 here)"),
    "copy_engine_c2c": ("the copy engine's rate on NVLink-C2C as each setup gets it: the model has one figure per "
                        "direction, Schieffer et al.'s CommScope (h2d 375, d2h 297 GB/s); Fusco et al.'s cudaMemcpy "
                        "(CUDA 12.3, driver 535) wrote pinned memory from the device at 169.6 but managed memory at "
                        "349.4, a difference by destination allocation the model does not have"),
    "hbm_copy": ("copy within HBM at more than half the STREAM rate: the model prices a copy as a read plus a write "
                 "at hbm_gbps (3400, Schieffer et al.'s STREAM); Fusco et al.'s idle read is 3796"),
    "fault_cost": ("GH200's managed-memory fault cost: not published, so the H100's calibrated cost per fault batch "
                   "is borrowed (labelled in every modelled record); it makes every in-memory managed run slow"),
    "ats_first_touch": ("system memory's GPU first touch: a page the GPU touches first faults to the CPU, which fills "
                        "the system page table (Schieffer et al. Sec. 5.1.2: srad initialises its data on the GPU, so "
                        "its managed version wins); the ATS model populates such pages at no cost"),
    "ats_eviction": ("eviction of system-allocated pages: the ATS model's access-counter migrations fill the GPU and "
                     "then stop (no eviction), so oversubscribed system-memory runs read more and more over the link, "
                     "while UVM's thrashing detection caps managed memory's losses; the driver's policy for this on "
                     "GH200 is not published and no lent machine (no ATS) can show it"),
}

# Source/destination kinds of Fusco et al. Fig. 5 (same GH200) the model prices: where the bytes live.
_WHERE = {"device": "hbm", "managed": "hbm", "pinned": "host", "numa:0": "host"}


def copy_gbps(src: str, dst: str, fig: dict):
    """(GB/s, rule) of cudaMemcpy src -> dst by the model's datapath rule, or (None, missing mechanism)."""
    a, b = _WHERE.get(src), _WHERE.get(dst)
    if a is None or b is None:
        return None, "host_copy"
    if a == "host" and b == "hbm":
        return fig["h2d_gbps"], "h2d_gbps"
    if a == "hbm" and b == "host":
        return fig["d2h_gbps"], "d2h_gbps"
    if a == b == "hbm":
        return fig["hbm_gbps"] / 2, "hbm_gbps / 2 (read and write in HBM)"
    return fig["host_gbps"] / 2, "host_gbps / 2 (read and write in host memory)"


def stream_gbps(op: str, kind: str, fig: dict):
    """(GB/s, rule) of the GPU reading or writing memory of a kind."""
    if kind == "device":
        return fig["hbm_gbps"], "hbm_gbps"
    return (fig["remote_gbps"], "remote_gbps") if op == "read" else (fig["remote_write_gbps"], "remote_write_gbps")


def _explain(err, rule, src, dst, pub):
    """The mechanism behind a cell above 50% (or '' where it is within)."""
    if abs(err) <= 0.5:
        return ""
    if src in ("pinned", "numa:0") and dst in ("pinned", "numa:0"):
        return "host_copy"
    return "copy_engine_c2c" if "h2d" in rule or "d2h" in rule else "hbm_copy"


def numeric_cells(fig: dict) -> list:
    """Fusco et al. Fig. 5 (cudaMemcpy) and Fig. 7 (Hopper reads and writes, idle): published against predicted."""
    from umscope.compare import load_reference
    rows = [dict(v, cite=f"{v['short']}, {v['figure']}") for v in load_reference(["GH200"])
            if v["source"] == "fusco2024" and v["figure"] in ("Fig. 5", "Fig. 7")]
    extra = dos.published().get("fusco2024_fig5", {})
    seen = {(r["match"].get("kind"), r["match"].get("dst_kind")) for r in rows if r["figure"] == "Fig. 5"}
    for c in extra.get("cells", []):
        if (c["src"], c["dst"]) not in seen:
            rows.append({"source": "fusco2024", "figure": "Fig. 5", "what": f"cudaMemcpy {c['src']} -> {c['dst']}",
                         "value": c["value"], "unit": "GB/s", "cite": extra["source"],
                         "match": {"benchmark": "copy", "kind": c["src"], "dst_kind": c["dst"]}})
    out = []
    for r in rows:
        m = r["match"]
        if m["benchmark"] == "copy":
            pred, rule = copy_gbps(m["kind"], m["dst_kind"], fig)
        else:
            pred, rule = stream_gbps(m["op"], m["kind"], fig)
        cell = {"figure": r["figure"], "what": r["what"], "published": r["value"], "unit": r["unit"],
                "citation": r["cite"], "predicted": pred, "rule": rule}
        if pred is None:
            cell.update(error=None, missing=rule)
        else:
            cell["error"] = (pred - r["value"]) / r["value"]
            cell["missing"] = _explain(cell["error"], rule, m["kind"], m.get("dst_kind"), r["value"])
        out.append(cell)
    return out


def shape_cells(sweep: dict) -> list:
    """Schieffer et al. Fig. 3 (system against managed memory in memory) and Fig. 11 (the speedup of system memory
    over managed memory as oversubscription grows): their text states directions, not numbers, so each cell is a
    direction, agreed with or not, and never enters the median."""
    ref = dos.published()
    f3 = ref.get("schieffer2024_fig3", {})
    f11 = ref["schieffer2024_fig11"]
    out = []
    for app, want in (f3.get("system_vs_managed") or {}).items():
        pts = sweep["curves"].get(app)
        if not pts:
            continue
        sp = pts[0]["speedup"]  # the sweep's first ratio (in memory)
        got = "system faster" if sp > 1 else "managed faster"
        out.append({"figure": "Fig. 3", "app": app, "published": want, "citation": f3["source"],
                    "predicted": f"{got} ({sp:.2f}x at ratio {pts[0]['ratio']})", "agrees": got == want,
                    "missing": "" if got == want else "ats_first_touch"})
    for app, pts in sweep["curves"].items():
        sp = [p["speedup"] for p in pts]
        got = dos.monotone(sp)
        want = f11["apps"].get(app, {}).get("monotone")
        out.append({"figure": "Fig. 11", "app": app, "published": want, "citation": f11["source"],
                    "predicted": f"{got} ({', '.join(f'{s:.2f}' for s in sp)} at ratios "
                                 f"{', '.join(str(p['ratio']) for p in pts)})",
                    "agrees": got == want, "missing": "" if got == want else "ats_eviction"})
    return out


def cells(progress=None) -> dict:
    fig, src = dos.machine_figures("gh200")
    num = numeric_cells(fig)
    errs = [abs(c["error"]) for c in num if c["error"] is not None]
    shapes = shape_cells(dos.schieffer(progress=progress))
    return {"figures_source": src, "numeric": num, "shapes": shapes,
            "median_abs_error": statistics.median(errs) if errs else None, "predicted_cells": len(errs),
            "above_50": [c for c in num if c["error"] is not None and abs(c["error"]) > 0.5],
            "missing": MISSING}


def markdown(res: dict, command: str) -> str:
    L = ["# GH200 against published figures",
         "",
         "**Validation against published figures on hardware not lent here.** No GH200 is lent to this project: "
         "every published value below is the study's (each with its citation, transcribed in "
         "python/umscope/reference/gh200.yaml and python/umscope/model/reference/published.yaml), every prediction "
         "is the model's, from python/umscope/model/figures/gh200.yaml (the studies' microbenchmark figures; what "
         "they do not publish is borrowed from the measured H100 and named) through the datapath rules and the "
         "simulator of python/umscope/model/published_gh200.py. Error = (predicted - published) / published.",
         "",
         f"Generated by `{command}` (no GPU). Model figures: {res['figures_source']}.",
         "",
         f"## Numeric cells: median |error| {res['median_abs_error']:.1%} over {res['predicted_cells']} cells "
         f"({len(res['above_50'])} above 50%)",
         "",
         "| figure (citation) | cell | published | predicted | rule | error | mechanism the model is missing |",
         "|---|---|---|---|---|---|---|"]
    for c in res["numeric"]:
        pred = "not predicted" if c["predicted"] is None else f"{c['predicted']:.1f} {c['unit']}"
        err = "-" if c["error"] is None else f"{c['error']:+.1%}"
        L.append(f"| {c['citation']} | {c['what']} | {c['published']} {c['unit']} | {pred} | {c['rule']} | {err} | "
                 f"{c['missing'] or ''} |")
    L += ["", "## Direction cells (the text states directions only: not in the median)", "",
          "| figure (citation) | application | published | predicted | agrees | mechanism the model is missing |",
          "|---|---|---|---|---|---|"]
    for c in res["shapes"]:
        L.append(f"| {c['citation']} | {c['app']} | {c['published']} | {c['predicted']} | "
                 f"{'yes' if c['agrees'] else 'no'} | {c['missing']} |")
    used = sorted({c["missing"] for c in res["numeric"] + res["shapes"] if c["missing"]})
    L += ["", "## The mechanisms named above", ""]
    L += [f"- **{k}**: {res['missing'][k]}." for k in used]
    L += ["", "Schieffer et al.'s Fig. 3 and Fig. 11 are plots whose values the text does not state; the cells "
          "above hold what the text does state (which version is faster, which way the curve goes). Their "
          "system-against-explicit comparison is not predicted: the model's explicit mode is calibrated by an "
          "explicit-mode run on the same machine, and none on a GH200 is published.", ""]
    return "\n".join(L)
