#!/usr/bin/env python3
"""LLM decode per model and placement (fusco2024 Fig. 17 on this machine): time per token against the
bound of where the weights live. A decode step reads every weight once, so the bound per token is
weight bytes / bandwidth, given twice: with the bandwidth umbench measures here first (gpu-stream `read`
of device memory for weights in GPU memory; of pinned host memory, read in place over the link, for
weights on the host) and with the datasheet/probe peak of umscope's bounds model. Weights are RANDOM
(built from the configurations; nothing downloaded). Each case is one `python -m umscope.apps.llm`
process (one decode step captured as a CUDA graph and replayed, timed with CUDA events per token, the
median over --reps generations of --tokens tokens); its logits are checked against mode torch's
(PyTorch's own allocator) of the same configuration.

    python3 bench/llm.py [--rows all|ROW,...] [--out rows.jsonl]       # measure (GPU), print the table
    python3 bench/llm.py --render rows.jsonl [--markdown docs/llm.md]  # the table from saved rows

Rows: the largest model that fits device-placed (target >= 70% of the HBM bound) and managed-prefetch
(target: within 5% of device once resident); host-resident models read in place over the link (pinned,
registered, mixed: weights pinned, KV cache on the GPU; target >= 80% of the host-link bound), in fp32:
cuBLAS's fp16 kernels on sm90 read host memory about 5x slower per byte (the fp16 probe row)."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _commit import commit  # noqa: E402

from umscope.apps import llm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# name -> (model, mode, extra argv)
# name -> (model, mode, extra argv), in the order `--rows all` runs them (the targets' rows first). Mode torch
# (PyTorch's own allocator, device memory) runs before a model's other rows: it writes the reference logits
# they are checked against, and its run is profiled (after the timed generations).
ROWS = {
    "codellama-34b/torch": ("codellama-34b", "torch", ["--profile"]),
    # Mode torch's compiled-vs-uncompiled check alone (one timed generation, no profile): with a cold inductor
    # cache the per-layer compile takes ~46 s of the row (run 5 ran out of time in the check).
    "codellama-34b/torch-check": ("codellama-34b", "torch", ["--reps", "1"]),
    "codellama-34b/explicit": ("codellama-34b", "explicit", []),
    "codellama-34b/managed-prefetch": ("codellama-34b", "managed-prefetch", []),
    # Weights read in place over the link, in fp32: cuBLAS's fp16 kernels on sm90 (nvjet, TMA) read host
    # memory far slower (the fp16 probe row measures it on 3 decode steps).
    "gpt2-xl/mixed-fp32": ("gpt2-xl", "mixed", ["--precision", "fp32", "--reps", "1", "--profile"]),
    "gpt2-xl/pinned-fp32": ("gpt2-xl", "pinned", ["--precision", "fp32", "--reps", "1"]),
    "gpt2-xl/pinned-fp16-probe": ("gpt2-xl", "pinned", ["--tokens", "4", "--reps", "1", "--profile"]),
    # Half precision read in place through umscope's Triton GEMV (--matvec auto at batch 1); Llama 3.1 8B's 15 GiB
    # make the per-step work other than the weight reads a smaller share (24 tokens: ~0.3 s each).
    # Uncompiled (cuBLAS elsewhere): compiling the step around the Triton op cold took the row past its time
    # (run 6); the GEMV's own compile is timed apart (matvec.jit_s), outside every timed step.
    "gpt2-xl/mixed-fp16": ("gpt2-xl", "mixed", ["--reps", "1", "--profile", "--compile", "off"]),
    "llama-8b/mixed-fp16": ("llama-8b", "mixed", ["--tokens", "24", "--reps", "1", "--profile"]),
    "gpt2-xl/mixed-fp32-triton": ("gpt2-xl", "mixed", ["--precision", "fp32", "--reps", "1", "--matvec", "triton"]),
    "llama-8b/torch": ("llama-8b", "torch", ["--profile"]),
    "llama-8b/explicit": ("llama-8b", "explicit", []),
    "llama-8b/managed-prefetch": ("llama-8b", "managed-prefetch", []),
    "llama-8b/explicit-eager": ("llama-8b", "explicit", ["--no-graph"]),
    "llama2-13b/torch": ("llama2-13b", "torch", []),
    "llama2-7b/torch": ("llama2-7b", "torch", []),
    "gpt2-xl/torch": ("gpt2-xl", "torch", []),
    "gpt2-xl/registered-fp32": ("gpt2-xl", "registered", ["--precision", "fp32", "--reps", "1"]),
    "gpt2-xl/managed-advice-fp32": ("gpt2-xl", "managed-advice", ["--precision", "fp32", "--reps", "1"]),
    "llama-1b/mixed-fp32": ("llama-1b", "mixed", ["--precision", "fp32", "--reps", "1"]),
}
MARK_BEGIN, MARK_END = "<!-- bench/llm.py table: begin -->", "<!-- bench/llm.py table: end -->"


def measured_bounds():
    """{'gpu': (GB/s, source), 'host': (GB/s, source)}: umbench gpu-stream read, median of its repetitions."""
    from umscope import native
    out = {}
    for where, kind, size in (("gpu", "device", "2GiB"), ("host", "pinned", "1GiB")):
        recs, status = native.run_case("gpu-stream", "--kind", kind, "--bytes", size, "--ops", "read", timeout=120)
        rec = next((r for r in recs if r.get("op") == "read"), None)
        if rec:
            out[where] = (rec["median"], f"measured: umbench gpu-stream read of {kind} memory, {size}, median of "
                                         f"{rec.get('n', '?')} (CUDA events)")
        else:
            out[where] = None
            print(f"bound {where}: not measured ({status.get('reason', '')[:200]})", flush=True)
    return out


def datasheet_bounds():
    from umscope import probe
    from umscope.model import bounds
    desc = bounds.describe(probe.probe())
    return {"gpu": desc["datapaths"].get("gpu_memory"), "host": desc["datapaths"].get("h2d")}


def protocol_of(datasheet, split):
    """{'gpu': None, 'host': (GB/s, source) or None}: the datasheet link's payload rate in the completions SM reads
    get, by a measured PCIe split (apps/llm_link.py). The HBM bound has no such term here."""
    from umscope.apps import llm_link
    host = (datasheet or {}).get("host")
    return {"gpu": None, "host": llm_link.protocol_bound(host[0], split) if host and split else None}


def protocol_bounds(datasheet, path):
    """{'host': (GB/s, source)}: the datasheet link's payload rate in the completions SM reads get, from the
    PCIe counters of a zero-copy read measured now (apps/llm_link.py); the split is written to `path` for the
    rows (--link-counters). The HBM bound has no such term here ({'gpu': None})."""
    from umscope.apps import llm_link
    try:
        m = llm_link.measure()
    except Exception as e:  # noqa: BLE001 - counters unavailable: the bound is left out, with the reason
        print(f"bound protocol host: not measured ({str(e)[:300]})", flush=True)
        return {"gpu": None, "host": None}, None
    with open(path, "w", encoding="utf-8") as f:
        json.dump(m, f)
    return protocol_of(datasheet, m), m


def stored_protocol(metas, path):
    """Runs saved without a protocol bound get the one of a stored PCIe split (`path`, written by
    python -m umscope.apps.llm_link --out), applied to their own datasheet link rate and named as stored."""
    from umscope.apps import llm_link
    m = llm_link.load(path)
    stored = dict(m, source=f"stored split {Path(path).name}: {m['source']}")
    for meta in metas:
        if (meta["bounds"].get("protocol") or {}).get("host"):
            continue
        bound = protocol_of(meta["bounds"].get("datasheet"), stored)
        if bound["host"]:
            bound["host"] = (bound["host"][0], bound["host"][1] + "; applied after the run")
            meta["bounds"]["protocol"] = bound


def run_row(name, a, timeout):
    model, mode, extra = ROWS[name]
    argv = [sys.executable, "-m", "umscope.apps.llm", "--model", model, "--mode", mode, "--tokens", str(a.tokens),
            "--precision", a.precision, "--prompt", str(a.prompt), "--reps", str(a.reps),
            *(["--compile", a.compile] if a.compile else []),
            *(["--link-counters", a.link_counters] if getattr(a, "link_counters", None) else []), *extra]
    t0 = time.time()
    # Its own process group, so that a case killed at its timeout takes its reference child with it.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    why = ""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        why = f"timed out after {timeout:.0f} s; "
    lines = [x for x in err.splitlines() if x.startswith("llm: [")]  # the progress lines, not the warnings
    recs = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    status = recs[-1] if recs and recs[-1].get("type") == "status" else \
        {"status": "failed", "reason": why + " / ".join(lines[-3:])[-400:]}
    err = why + err[-1200:]
    return {"row": name, "model": model, "mode": mode, "argv": " ".join(argv[1:]), "wall_s": round(time.time() - t0, 1),
            "status": status, "stderr_tail": err[-1200:], "decode": next((r for r in recs if r.get("op") == "decode"), None),
            "profile": next((r for r in recs if r.get("op") == "profile"), None)}


def table(rows, metas):
    """Markdown lines of the per-model table; each row's bounds are those of its run (metas[row['run']])."""
    lines = ["| run | model | weights | placement | decode | ms/token (median) | spread (max-min)/median | "
             "p10-p90 ms | tokens/s | time for the tokens s | bound ms (measured) | % of measured bound | "
             "% of protocol bound | % of datasheet bound | vs device (explicit, else torch) | logits |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    # managed-prefetch against the device placement of the same run and step kind: explicit, else torch
    explicit = {}
    for want in ("torch", "explicit"):
        explicit.update({(r.get("run", 0), r["model"], step_id(r["decode"])): r["decode"]["median"] for r in rows
                         if r["decode"] and r["mode"] == want and r["decode"].get("graph")})
    for r in rows:
        if r["row"].endswith("/profile"):  # its own run under the profiler: in the breakdown only
            continue
        d, run = r["decode"], r.get("run", 0)
        meta = metas[run]
        argv = r.get("argv", "").split()
        prec = argv[len(argv) - 1 - argv[::-1].index("--precision") + 1] if "--precision" in argv else meta["precision"]
        gib = llm.weight_bytes(r["model"], prec) / 2**30
        if not d:
            why = " / ".join(x.strip() for x in r["status"].get("reason", "").splitlines() if x.strip())
            why = why if len(why) <= 300 else why[:120] + " ... " + why[-170:]
            lines.append(f"| {run + 1} | {r['model']} | {gib:.2f} GiB {prec} | {r['mode']} | | {r['status'].get('status')}: "
                         f"{why.replace('|', '/')} | | | | | | | | | | |")
            continue
        where = llm.location(d.get("weights_kind"))
        pct = {}
        for src in ("measured", "protocol", "datasheet"):
            bw = (meta["bounds"].get(src) or {}).get(where)
            pct[src] = (d["bytes"] / (bw[0] * 1e9), 100 * d["bytes"] / (bw[0] * 1e9) / d["median"]) if bw else None
        vs = ""
        dkey = (run, r["model"], step_id(d))
        if r["mode"] == "managed-prefetch" and dkey in explicit:
            vs = f"{100 * (d['median'] / explicit[dkey] - 1):+.1f}%"
        place = r["mode"] if r["mode"] != "mixed" else f"mixed (weights {d['weights_kind']}, cache {d['cache_kind']})"
        logits = f"{d['verified'].split(' ')[0]} ({d['max_rel_error']:.1g})"
        if d.get("logits_compared") and "last" not in d["logits_compared"]:
            logits += "; prefill and first step (greedy tokens diverge later)"
        cc = d.get("compile_check")
        if cc:
            logits += (f"; compiled vs uncompiled step {cc['error']:.1g} (tolerance {cc['tolerance']:g}"
                       f"{'' if cc['tokens_match'] else ', tokens part later'}), uncompiled "
                       f"{1e3 * cc['uncompiled_s_per_token']:.3f} ms/token")
        m_ms = f"{1e3 * pct['measured'][0]:.3f}" if pct["measured"] else "-"
        tot = f"{d['total_s']:.3f}" + ("" if d.get("tokens", 100) == 100 else f" ({d['tokens']} tokens)")
        m_pct = f"{pct['measured'][1]:.1f}%" if pct["measured"] else "-"
        d_pct = f"{pct['datasheet'][1]:.1f}%" if pct["datasheet"] else "-"
        p_pct = f"{pct['protocol'][1]:.1f}%" if pct["protocol"] else "-"
        lines.append(
            f"| {run + 1} | {r['model']} | {d['bytes'] / 2**30:.2f} GiB {d['precision']} | {place} | "
            f"{step_kind(d)} | {1e3 * d['median']:.3f} | {100 * d['spread']:.1f}% | "
            f"{1e3 * d['p10']:.3f}-{1e3 * d['p90']:.3f} | {d['tokens_per_s']:.1f} | "
            f"{tot} | "
            f"{m_ms} | {m_pct} | {p_pct} | {d_pct} | {vs} | {logits} |")
    return lines


def step_id(d):
    """What makes two rows' steps the same computation: graph or eager, compiled or not, the matvec kernel."""
    return (bool(d.get("graph")), bool((d.get("compile") or {}).get("used")), (d.get("matvec") or {}).get("used"))


def step_kind(d):
    """The decode column: graph or eager, compiled (with its compile seconds), the matvec kernel if not cuBLAS."""
    parts = ["graph" if d.get("graph") else "eager"]
    comp = d.get("compile") or {}
    if comp.get("used"):
        what = "compiled per layer" if comp.get("scope") == "decoder layers" else "compiled"
        how = ([f"{comp['graphs']} graphs"] if comp.get("graphs") else []) + \
              ([f"{comp['seconds']:.0f} s"] if comp.get("seconds") is not None else [])
        parts.append(what + (f" ({', '.join(how)})" if how else ""))
    elif comp.get("error"):
        parts.append("not compiled: " + comp["error"][:80].replace("|", "/"))
    if (d.get("matvec") or {}).get("used") == "triton":
        parts.append("Triton GEMV")
    return ", ".join(parts)


def profile_lines(rows):
    out = []
    for r in rows:
        p = r.get("profile")
        if not p:
            continue
        per = p["kernel_s_per_step"]
        parts = ", ".join(f"{k} {1e3 * v:.3f} ms" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
        out.append(f"- run {r.get('run', 0) + 1}, {r['model']} {r['mode']} ({step_kind(p)}): step "
                   f"{1e3 * p['step_s']:.3f} ms = kernels {1e3 * p['busy_s_per_step']:.3f} ms ({parts}; "
                   f"{p['kernels_per_step']:.0f} kernels per step) + {1e3 * p['gap_s_per_step']:.3f} ms between "
                   f"kernels; matmul kernels read the weights at {p['matmul_gbps']:.0f} GB/s. Top kernels: " +
                   "; ".join(f"{k[:60]} {1e3 * v:.3f} ms" for k, v in p["top_kernels"][:4]))
    return out


def render(rows, metas, markdown=None):
    head = []
    for i, meta in enumerate(metas):
        head += [f"Run {i + 1}: {meta['device']}, umscope {meta['commit']} (torch {meta['torch']}, transformers "
                 f"{meta['transformers']}), {meta['precision']}, prompt {meta['prompt']}, {meta['tokens']} tokens, "
                 f"{meta['reps']} timed generations per case unless the row asks for fewer, random weights; "
                 f"`{meta['command']}`. Bounds per token = weight bytes / bandwidth of where the weights live:"]
        for src in ("measured", "protocol", "datasheet"):
            for where in ("gpu", "host"):
                v = (meta["bounds"].get(src) or {}).get(where)
                if src == "protocol" and (where == "gpu" or "protocol" not in meta["bounds"]):
                    continue  # the HBM bound has no protocol term; a run without one (and no stored split)
                head.append(f"  - {src}, weights in "
                            f"{'GPU memory' if where == 'gpu' else 'host memory (read in place over the link)'}: "
                            + (f"{v[0]:.1f} GB/s ({v[1]})" if v else "unknown"))
    body = head + [""] + table(rows, metas)
    prof = profile_lines(rows)
    if prof:
        body += ["", "Where a decode step's time goes (torch.profiler, CUPTI kernel records):", ""] + prof
    text = "\n".join(body)
    print(text)
    if markdown:
        path = Path(markdown)
        doc = path.read_text() if path.exists() else ""
        block = f"{MARK_BEGIN}\n{text}\n{MARK_END}"
        if MARK_BEGIN in doc and MARK_END in doc:
            doc = re.sub(re.escape(MARK_BEGIN) + ".*?" + re.escape(MARK_END), lambda _: block, doc, flags=re.S)
        else:
            doc = doc.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="all", help=f"comma-separated, of: {', '.join(ROWS)}")
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3, help="timed generations per case (rows may ask for fewer)")
    ap.add_argument("--precision", default="fp16", choices=llm.DTYPES, help="fp16 (fusco2024's torch.float16)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per case")
    ap.add_argument("--compile", choices=["auto", "on", "layers", "off"],
                    help="passed to every case (default: the application's, auto)")
    ap.add_argument("--budget", type=float, help="seconds for the whole run: a case gets at most what is left, "
                                                 "and none starts with less than 10 s left")
    ap.add_argument("--out", help="append the rows (JSON lines: a header, then one per case) to this file")
    ap.add_argument("--link-counters", help="PCIe split file for the rows (default: measured at the start; "
                                              "see python -m umscope.apps.llm_link), or none; with --render: the "
                                              "protocol bound of runs saved without one")
    ap.add_argument("--render", nargs="+", metavar="ROWS_JSONL", help="print the table of saved rows; no GPU")
    ap.add_argument("--markdown", help="write the table into this Markdown file between its markers")
    a = ap.parse_args()
    if a.render:
        rows, metas = [], []
        for f in a.render:
            for line in Path(f).read_text().splitlines():
                obj = json.loads(line)
                if obj.get("type") == "header":
                    metas.append(obj)
                elif metas:
                    rows.append(dict(obj, run=len(metas) - 1))
        if not metas:
            sys.stderr.write("bench/llm.py: error: no header line in the rows given\n")
            sys.exit(2)
        if a.link_counters and a.link_counters != "none":
            stored_protocol(metas, a.link_counters)
        render(rows, metas, a.markdown)
        return
    names = list(ROWS) if a.rows == "all" else a.rows.split(",")
    bad = [n for n in names if n not in ROWS]
    if bad:
        sys.stderr.write(f"bench/llm.py: error: unknown rows {bad} (known: {', '.join(ROWS)})\n")
        sys.exit(2)
    try:
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"bench/llm.py: PyTorch and transformers are needed: {e}")
    if not torch.cuda.is_available():
        sys.exit("bench/llm.py: no CUDA GPU visible to PyTorch")
    meta = {"type": "header", "commit": commit(ROOT), "device": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "transformers": transformers.__version__, "precision": a.precision,
            "prompt": a.prompt, "tokens": a.tokens, "reps": a.reps,
            "command": "python3 bench/llm.py " + " ".join(sys.argv[1:]),
            "bounds": {"measured": measured_bounds(), "datasheet": datasheet_bounds()}}
    if a.link_counters == "none":
        meta["bounds"]["protocol"], meta["link"] = {"gpu": None, "host": None}, None
    elif a.link_counters:  # a split measured before (python -m umscope.apps.llm_link --out FILE)
        from umscope.apps import llm_link
        meta["link"] = llm_link.load(a.link_counters)
        meta["bounds"]["protocol"] = protocol_of(meta["bounds"]["datasheet"], meta["link"])
    else:
        link_file = os.path.abspath((a.out or "llm-rows") + ".link.json")
        meta["bounds"]["protocol"], meta["link"] = protocol_bounds(meta["bounds"]["datasheet"], link_file)
        a.link_counters = link_file if meta["link"] else "none"
    for src, b in meta["bounds"].items():
        for where, v in b.items():
            print(f"bound {src} {where}: " + (f"{v[0]:.1f} GB/s ({v[1]})" if v else "unknown"), flush=True)
    out = open(a.out, "a", encoding="utf-8") if a.out else None
    if out:
        out.write(json.dumps(meta) + "\n")
        out.flush()
    rows, t_end = [], time.time() + a.budget if a.budget else None
    for n in names:
        left = t_end - time.time() if t_end else None
        if left is not None and left < 10:
            print(f"{n}: not run ({left:.0f} s of the budget left)", flush=True)
            continue
        r = run_row(n, a, min(a.timeout, left) if left is not None else a.timeout)
        rows.append(r)
        d = r["decode"]
        print(f"{n}: " + (f"{1e3 * d['median']:.3f} ms/token spread {100 * d['spread']:.1f}% "
                          f"{d['verified']} [{r['wall_s']} s]" if d else f"{r['status']}"), flush=True)
        if out:
            out.write(json.dumps(r) + "\n")
            out.flush()
    render(rows, [meta])


if __name__ == "__main__":
    main()
