"""Report section of the llm application (fusco2024 Fig. 17 on this machine): the time for the generated
tokens per model and placement, and the time per decode step against the weights' bytes with the bounds
drawn: a decode step reads every weight once, so its floor is weight bytes / the peak bandwidth of where
the weights live (GPU memory, or the host link for host-resident kinds). Two peaks for the host link: the
datasheet rate (bounds.describe) and the protocol bound, the payload rate of that link in the completions SM
reads get, which each record of a host-resident decode carries with its source (apps/llm_link.py)."""

from collections import OrderedDict

from umscope.apps.llm import token_bound
from umscope.model import bounds
from umscope.report.common import e, html_table, num_cell, records_table
from umscope.report.registry import family_section
from umscope.report.svg import hbar_chart, line_chart, size_tick


def _x(r) -> dict:
    return r.get("extra") or {}


def compile_seconds(x):
    """The compile seconds of a decode record: compile.seconds (records before it had a top-level compile_s)."""
    comp = x.get("compile") or {}
    return comp["seconds"] if comp.get("seconds") is not None else x.get("compile_s")


def protocol(x):
    """(GB/s, source) of the record's protocol bound, or None."""
    p = (x.get("bounds") or {}).get("protocol")
    return (p[0], p[1]) if p else None


def section(recs, fp=None) -> str:
    fp = fp or {}
    desc = bounds.describe(fp)
    decode = [r for r in recs if r["op"] == "decode"]
    gen = {r["case_id"]: r for r in recs if r["op"] == "generate"}
    if not decode:
        return ""
    groups, rows, series, protos = OrderedDict(), [], OrderedDict(), OrderedDict()
    for r in sorted(decode, key=lambda r: (r["bytes"] or 0, r["kind"] or "")):
        x = _x(r)
        place = r["kind"] if r["kind"] != "mixed" else f"mixed (weights {x.get('weights_kind')}, cache {x.get('cache_kind')})"
        if x.get("graph") is False:
            place += " (eager)"
        if (x.get("compile") or {}).get("used"):
            place += " (compiled)"
        if (x.get("matvec") or {}).get("used") == "triton":
            place += " (Triton GEMV)"
        g = gen.get(r["case_id"])
        if g:
            groups.setdefault(f"{x.get('model')} {x.get('precision')} ({size_tick(r['bytes'])})", []).append(
                (place, g["median"], None, None))
        b, path = token_bound(r, desc)
        series.setdefault(place, []).append((r["bytes"], r["median"] * 1e3, r["min"] * 1e3, r["max"] * 1e3))
        bound = ([num_cell(f"{1e3 * b:.4g} ({path})"), num_cell(f"{100 * b / r['median']:.1f}%")]
                 if b else [path, ""])
        pb = protocol(x)
        if pb and r["bytes"]:
            protos.setdefault(pb[1], pb[0])
            tb = r["bytes"] / (pb[0] * 1e9)
            bound += [num_cell(f"{1e3 * tb:.4g} ({pb[0]:.1f} GB/s)"), num_cell(f"{100 * tb / r['median']:.1f}%")]
        else:
            bound += [((x.get("bounds") or {}).get("protocol_why") or "")[:80], ""]
        comp_s = compile_seconds(x)
        rows.append([str(x.get("model")), str(x.get("precision")), num_cell(size_tick(r["bytes"])), place,
                     num_cell(f"{1e3 * (x.get('prefill_s') or 0):.3g}"),
                     num_cell("" if comp_s is None else format(comp_s, ".3g")), num_cell(f"{1e3 * r['median']:.4g}"),
                     num_cell(f"{100 * (r.get('spread') or 0):.0f}%"), num_cell(f"{x.get('tokens_per_s') or 0:.4g}"),
                     num_cell(f"{g['median'] if g else 0:.4g}")] + bound
                    + [f"{x.get('verified')} (max rel. error {x.get('max_rel_error') or 0:.2g})"])
    xs = sorted({r["bytes"] for r in decode if r["bytes"]})
    for path, label in (("gpu_memory", "HBM bound"), ("h2d", "host-link bound")):
        peak = desc["datapaths"].get(path)
        if peak and xs:
            series[f"{label}: {peak[0]:g} GB/s ({peak[1]})"] = [(b, b / (peak[0] * 1e9) * 1e3) for b in xs]
    for i, (src, gbps) in enumerate(protos.items()):
        series[f"host-link protocol bound {i + 1}: {gbps:.1f} GB/s"] = [(b, b / (gbps * 1e9) * 1e3) for b in xs]
    out = []
    if groups:
        tokens = _x(decode[0]).get("tokens")
        out.append(hbar_chart(list(groups.items()), "s", f"Time for {tokens} tokens by model and placement (s)"))
    out.append(line_chart(list(series.items()), "Time per decode step against the weights' bytes (whiskers: "
                          "min..max over the steps), with the bounds", "weight bytes", "ms per token",
                          x_log=True, y_log=True, x_fmt=size_tick))
    out.append(html_table(
        ["model", "precision", "weights", "placement", "prefill ms", "compile s", "ms per token", "spread", "tokens/s",
         "time for the tokens s", "datasheet bound ms per token (datapath)", "of datasheet bound",
         "protocol bound ms per token (GB/s)", "of protocol bound", "verified"], rows,
        "Weights are random (built from the published configurations with transformers; "
        "nothing was downloaded). Per-token time: CUDA events around each decode step (one step captured as a "
        "CUDA graph and replayed, unless marked eager; compiled: the step was compiled by torch.compile before "
        "capture, its compile time spent in the warm-up, outside every timed step; Triton GEMV: the one-row "
        "products of host-resident weights ran umscope's kernel), median over the steps after a warm-up "
        "generation. "
        "The bound reads every weight once per step at the peak of where the "
        "weights live; the KV cache and activations are not counted, so the bound is a "
        "floor. Datasheet bound: bounds.describe's peak (HBM: memory clock x bus width; host link: PCIe "
        "generation x lanes, 128b/130b). Protocol bound (host-resident weights): the datasheet link's payload "
        "rate in the completion packets SM reads get, payload / (payload + header + framing and LCRC), the "
        "header measured with the PCIe counters: " +
        ("; ".join(f"{i + 1}: {e(src)}" for i, src in enumerate(protos)) or "no record carries one") + ". "
        "Verified: the logits equal those of PyTorch's own allocator in device memory (same seed)."))
    return "".join(out)


@family_section("llm")
def _family(bench, recs, page) -> str:
    return section(recs, page.fp) + records_table(recs)
