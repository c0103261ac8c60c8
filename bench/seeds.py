#!/usr/bin/env python3
"""The four studies' figures that the lent machines can run, each reproduced by umscope's own commands and
written as one page of docs/seeds/ (issue 40): the provenance (machine kind, GPU, commit, the command lines with
their wall time and exit status), umscope's table and an SVG chart (umscope.report.svg), and the published
values beside umscope's where the study printed them, each with its citation, the study's machine, the ratio
umscope / published and why the two differ (in kind, e.g. NVLink-C2C against PCIe, or by measurement).

    python3 bench/seeds.py --figures single --kind nvidia-h100-x1 --out $OUT            # about 6 min, 1 GPU
    python3 bench/seeds.py --figures fusco-fig8-10 --kind nvidia-h100-x1 --out $OUT     # one figure, here about 15 s
    python3 bench/seeds.py --figures multi --kind nvidia-h100-x4 --out $OUT             # about 4 min, 4 GPUs
    python3 bench/seeds.py --render $OUT/seeds-nvidia-h100-x1.jsonl --pages docs/seeds  # the pages, any machine

--figures: names (`--figures list` prints them), `single` (those one GPU runs), `multi` (those that need two GPUs
or more) or `all`; an unknown name is an error (exit 2, nothing run). Each figure has a time budget (seconds;
--budget-scale multiplies them): its commands run in order, each stopped at what is left of it, and what the
budget did not reach is recorded as not run, with that reason. A figure needing more GPUs than --devices (default:
every GPU the probe sees) is recorded as skipped with the reason. Nothing is measured here: every number on a page
is a record of the run (its median, with min-max where it has repetitions) or a published value labelled with its
citation (python/umscope/reference/gh200.yaml, python/umscope/model/reference/published.yaml). The renderers, the
published values and why they differ are in bench/seeds_pages.py.

Under --out: seeds-KIND.jsonl (the header, every command with its wall time and exit status, every record and
skip) and seeds-KIND.log (the commands' progress); with --pages the pages (NAME.md, NAME.svg) too. The summary
table (figure, status, commands, records, seconds) is printed last."""
import argparse
import datetime
import json
import os
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _commit import commit as _commit  # noqa: E402
from seeds_pages import (  # noqa: E402 - the published values and the renderers (bench/seeds_pages.py)
    GEMM_PRECISIONS, SCHIEFFER_SIZES, ok, render_cooper, render_fig5, render_fig8_10, render_fig12, render_fig12_peer,
    render_fig13, render_fig14, render_fig15, render_fig16, render_fig17, render_fig18, render_schieffer3,
    render_schieffer7, render_schieffer10, render_schieffer45, sources)

# ------------------------------------------------------------------ the figures and their commands
# A command: (tag, argv) where argv is an umscope command line without "umscope" (bench and app: the records it
# prints with --json), or ("profile", FLAGS, PROGRAM) for `umscope profile FLAGS -- umbench run PROGRAM...`.

COPY_KINDS = ["device", "managed", "pinned", "system", "async", "vmm", "hostalloc"]
CHASE_SIZES = "4K,64K,256K,1M,4M,16M,32M,64M,256M,1G"
# Each tag with its umbench program: sgemm is umscope's alias of gemm at fp32 (apps.ALIASES), which `umbench run`
# does not know.
COOPER_APPS = {"triad": ["triad"], "conv2d": ["conv2d"], "jacobi2d": ["jacobi2d"], "mvt": ["mvt"],
               "gesummv": ["gesummv"], "sgemm": ["gemm", "--precision", "fp32"], "bfs": ["bfs"]}
LLM_MODELS = ["llama2-7b", "llama2-13b"]


def _kinds(kinds):
    return [x for k in kinds for x in ("--kind", k)]


def _gemm(prec, n, a, b, c="device", iterations="4"):
    return (f"gemm {prec} n={n} A={a} B={b} C={c}",
            ["app", "run", "gemm", "--precision", prec, "--n", str(n), "--place-a", a, "--place-b", b, "--place-c", c,
             "--iterations", iterations, "--mode", "explicit"])


def _llm(model, mode, weights=None, cache="device"):
    argv = ["app", "run", "llm", "--model", model, "--mode", mode, "--precision", "fp16", "--tokens", "100",
            "--reps", "1", "--warmup", "0", "--link-counters", "none", "--compile", "off"]
    return (f"llm {model} {mode}" + (f" weights={weights}" if weights else "")
            + (f" cache={cache}" if weights and cache != "device" else ""),
            argv + (["--weights", weights, "--cache", cache] if weights else []))


def cmds_fig5(ctx):
    return [("copy", ["bench", "copy", *_kinds(COPY_KINDS), "--size", "256M", "--filter", "engine=ce",
                      "--filter", "direction=uni", "--reps", "5"])]


def cmds_fig5_peer(ctx):
    return [("copy", ["bench", "copy", *_kinds(["device", "peer:1", "managed", "pinned", "system"]), "--size", "256M",
                      "--filter", "engine=ce", "--filter", "direction=uni", "--filter", "peer", "--reps", "5"])]


def cmds_fig8_10(ctx):
    # The scaling family's two sweeps on the GPU's own memory: blocks 1 to 8 x the SMs at 256 threads, then 64 to
    # 1024 threads per block at the full grid; 17 cases of 1 GiB, 10 repetitions (about 15 s on an H100).
    return [("scaling", ["bench", "scaling", "--kind", "device", "--ops", "read,write,copy", "--reps", "10"])]


def cmds_fig12(ctx):
    return [("gpu", ["bench", "latency", *_kinds(["device", "pinned", "managed"]), "--size", CHASE_SIZES,
                     "--filter", "processor=gpu", "--reps", "3"]),
            ("cpu", ["bench", "latency", "--kind", "system", "--size", CHASE_SIZES, "--filter", "processor=cpu",
                     "--reps", "3"])]


def cmds_fig12_peer(ctx):
    # Local and peer chase over the same footprints in one call: the peer-L2 question.
    return [("chase", ["bench", "latency", *_kinds(["device", "peer:1"]), "--size", CHASE_SIZES,
                       "--filter", "processor=gpu", "--reps", "3"])]


def cmds_fig13(ctx):
    return [("pingpong", ["bench", "pingpong", *_kinds(["system", "pinned", "device"])])]


def cmds_fig13_gpus(ctx):
    # The cases across GPUs are planned only without --kind (plans.pingpong_cases): every pair a < b, the flag
    # on the first GPU, on the second (peer:B), in pinned or in managed memory.
    return [("pingpong", ["bench", "pingpong", "--filter", "pair=gpu-gpu", "--filter", "peer="])]


def cmds_fig14(ctx):
    # One run of n ranks measures mbw with k = 1, 2, .. n/2 pairs sending at once (each record says its `pairs`
    # and `active_processes`): 8 ranks give the study's 1 to 4 pairs; host memory as the study's DDR.
    n = min(8, ctx["cpus"] - ctx["cpus"] % 2)
    return [(f"mpi n={n}", ["bench", "mpi", "--launcher", "mpirun", "-n", str(n), "--kind", "system",
                            "--ops", "mbw", "--size", "64K,1M,16M", "--reps", "3", "--warmup", "1"])] if n >= 2 else []


def cmds_fig15(ctx):
    out = [_gemm(p, 4096, a, b) for p in GEMM_PRECISIONS for a in ("device", "pinned") for b in ("device", "pinned")]
    out += [_gemm("fp32", 4096, a, b) for a, b in (("managed", "device"), ("device", "managed"), ("managed", "managed"))]
    out += [_gemm("fp32", 4096, "device", "device", c) for c in ("pinned", "managed")]
    return out


def cmds_fig15_peer(ctx):
    return [_gemm(p, 4096, a, b) for p in GEMM_PRECISIONS
            for a, b in (("peer:1", "device"), ("device", "peer:1"), ("peer:1", "peer:1"))]


def cmds_fig16(ctx):
    out = [_gemm(p, n, "device", "device") for p in GEMM_PRECISIONS for n in (1024, 2048, 4096, 8192, 16384)]
    return out + [_gemm("fp64", n, a, "device") for a in ("pinned", "managed") for n in (1024, 2048, 4096)]


def cmds_fig17(ctx):
    return [_llm(m, mode) for m in LLM_MODELS for mode in ("explicit", "managed", "pinned")]


def cmds_fig17_split(ctx):
    # the study's allocator split as the app makes it: the weights (each block above 1 MB) in host memory, the KV
    # cache and activations from a cudaMallocAsync pool on the GPU
    return [_llm(m, "mixed", "pinned", cache="async") for m in LLM_MODELS]


def cmds_fig17_peer(ctx):
    return [_llm(m, "mixed", "peer:1") for m in LLM_MODELS]


def cmds_fig18(ctx):
    return [("nccl", ["bench", "nccl", *_kinds(["device", "pinned", "peer:1"]), "--ops", "allreduce,allgather",
                      "--size", "1M,16M,256M,1G", "--reps", "5"])]


def cmds_schieffer3(ctx):
    return [(f"{app} explicit,managed", ["app", "run", app, *opts, "--mode", "explicit", "--mode", "managed",
                                         "--reps", "1", "--warmup", "0"])
            for app, opts in SCHIEFFER_SIZES.items()]


def cmds_schieffer45(ctx):
    return [("hotspot", ("profile", ["--um-trace"], ["hotspot", "--mode", "managed", "--rows", "16384", "--cols",
                                                      "16384", "--iterations", "4"])),
            ("qv", ("profile", ["--um-trace"], ["qv", "--mode", "managed", "--qubits", "28", "--init", "cpu"]))]


def cmds_schieffer7(ctx):
    pages = ["base", "thp"]
    return [("gpu-stream", ["bench", "gpu-stream", *_kinds([f"registered,page={p}" for p in pages]),
                            "--ops", "read,write", "--size", "1G", "--reps", "5"]),
            ("cpu-stream", ["bench", "cpu-stream", *_kinds([f"system,page={p}" for p in pages]),
                            "--ops", "read,copy", "--threads", "all", "--size", "1G", "--reps", "5"]),
            ("firsttouch", ["bench", "firsttouch", *_kinds([f"system,page={p}" for p in pages]), "--size", "1G",
                            "--filter", "by=cpu"])]


def cmds_schieffer10(ctx):
    srad = ["srad", "--rows", "8192", "--cols", "8192", "--iterations", "12"]
    out = []
    for mode in ("managed", "explicit"):
        out.append((f"{mode} time", ["app", "run", *srad, "--mode", mode, "--reps", "1", "--warmup", "0"]))
        for cset in ("link", "memory"):
            out.append((f"{mode} {cset}", ("profile", ["--counters", "kernel", "--counter-set", cset],
                                           [*srad, "--mode", mode])))
    return out


def cmds_cooper(ctx):
    return [(app, ("profile", ["--uvm-events"], [*prog, "--mode", "managed", "--footprint", "1G"]))
            for app, prog in COOPER_APPS.items()]


class Figure:
    def __init__(self, name, study, figure, title, cmds, gpus, budget, render):
        self.name, self.study, self.figure, self.title = name, study, figure, title
        self.cmds, self.gpus, self.budget, self.render = cmds, gpus, budget, render


FIGURES = {}


def _fig(*a):
    f = Figure(*a)
    FIGURES[f.name] = f


_fig("fusco-fig5", "fusco2024", "Fig. 5", "cudaMemcpy throughput over every pair of kinds", cmds_fig5, 1, 20,
     render_fig5)
_fig("fusco-fig8-10", "fusco2024", "Figs. 8, 10", "GPU read, write and copy against blocks and threads per block",
     cmds_fig8_10, 1, 25, render_fig8_10)
_fig("fusco-fig12", "fusco2024", "Fig. 12", "pointer chase against footprint, with the cache regions",
     cmds_fig12, 1, 25, render_fig12)
_fig("fusco-fig13", "fusco2024", "Fig. 13", "ping-pong round trips, CPU and GPU", cmds_fig13, 1, 15, render_fig13)
_fig("fusco-fig14", "fusco2024", "Fig. 14", "MPI bandwidth with 1 to 4 pairs of processes", cmds_fig14, 0, 25,
     render_fig14)
_fig("fusco-fig15", "fusco2024", "Fig. 15", "GEMM with A, B, C placed in each kind", cmds_fig15, 1, 40, render_fig15)
_fig("fusco-fig16", "fusco2024", "Fig. 16", "GEMM against size and precision", cmds_fig16, 1, 30, render_fig16)
_fig("fusco-fig17", "fusco2024", "Fig. 17", "LLM decoding with the weights in each memory", cmds_fig17, 1, 60,
     render_fig17)
_fig("schieffer-fig3", "schieffer2024", "Fig. 3", "managed against explicit at the study's sizes", cmds_schieffer3,
     1, 60, render_schieffer3)
_fig("schieffer-fig4-5", "schieffer2024", "Figs. 4, 5", "memory timelines of hotspot and QV", cmds_schieffer45, 1,
     30, render_schieffer45)
_fig("schieffer-fig7", "schieffer2024", "Fig. 7", "base pages against transparent huge pages", cmds_schieffer7, 1,
     15, render_schieffer7)
_fig("schieffer-fig10", "schieffer2024", "Fig. 10", "SRAD time and traffic per iteration", cmds_schieffer10, 1, 30,
     render_schieffer10)
_fig("cooper-fig8-9", "cooper2024", "Figs. 8, 9", "fault density per application, over time and per allocation",
     cmds_cooper, 1, 30, render_cooper)
_fig("fusco-fig5-peer", "fusco2024", "Fig. 5 (peer)", "cudaMemcpy to and from a peer GPU", cmds_fig5_peer, 2, 20,
     lambda d: render_fig5(d, peer=True))
_fig("fusco-fig12-peer", "fusco2024", "Fig. 12 (peer)", "local and peer pointer chase: does L2 cache peer memory?",
     cmds_fig12_peer, 2, 30, render_fig12_peer)
_fig("fusco-fig13-gpus", "fusco2024", "Fig. 13 (GPUs)", "ping-pong between every pair of GPUs", cmds_fig13_gpus,
     2, 25, lambda d: render_fig13(d, gpus=True))
_fig("fusco-fig15-peer", "fusco2024", "Fig. 15 (peer)", "GEMM with A or B on a peer GPU", cmds_fig15_peer, 2, 35,
     lambda d: render_fig15(d, peer=True))
_fig("fusco-fig17-split", "fusco2024", "Fig. 17 (split)",
     "LLM decoding with the study's allocator split: weights in host memory, small blocks from cudaMallocAsync",
     cmds_fig17_split, 1, 150, lambda d: render_fig17(d, split=True))
_fig("fusco-fig17-peer", "fusco2024", "Fig. 17 (peer)", "LLM decoding with the weights on a peer GPU",
     cmds_fig17_peer, 2, 60, lambda d: render_fig17(d, peer=True))
_fig("fusco-fig18", "fusco2024", "Fig. 18", "NCCL all-reduce and all-gather over device, host and peer buffers",
     cmds_fig18, 2, 50, render_fig18)

GROUPS = {"single": [f for f, x in FIGURES.items() if x.gpus <= 1],
          "multi": [f for f, x in FIGURES.items() if x.gpus >= 2], "all": list(FIGURES)}

# ------------------------------------------------------------------ running


def show(cmd) -> str:
    if isinstance(cmd, tuple):
        return "umscope profile " + " ".join(cmd[1]) + " -- umbench run " + shlex.join(cmd[2])
    return "umscope " + shlex.join(cmd)


def slim(r):
    """A record as kept in the JSON lines: its per-repetition conditions dropped (the store has them)."""
    r = dict(r)
    if isinstance(r.get("extra"), dict):
        r["extra"] = {k: v for k, v in r["extra"].items() if k != "conditions"}
    return r


def run_figure(f, ctx, store, budget, emit, log):
    """Runs a figure's commands within its budget; emits every command, record, profile and skip."""
    import node_reference
    import um_profile
    if f.gpus > ctx["gpus"]:
        emit({"type": "skip", "figure": f.name, "what": "the figure",
              "reason": f"needs {f.gpus} GPUs; this run has {ctx['gpus']} (--devices or the probe)"})
        return
    t0 = time.time()
    for tag, cmd in f.cmds(ctx):
        left = budget - (time.time() - t0)
        if left < 2:
            emit({"type": "skip", "figure": f.name, "what": show(cmd),
                  "reason": f"not run: the figure's budget of {budget:.0f} s was spent"})
            continue
        log(f"[{f.name}] {show(cmd)} (at most {left:.0f} s)")
        t1 = time.time()
        if isinstance(cmd, tuple):
            app, prof, summary, status = um_profile.profile(["umbench", "run", *cmd[2]], timeout=left,
                                                            flags=tuple(cmd[1]))
            rc = status.get("status", "ok") if status else "no status"
            emit({"type": "profile", "figure": f.name, "tag": tag, "program": cmd[2], "app": app and slim(app),
                  "prof": {k: slim(v) for k, v in prof.items()}, "status": status})
        else:
            with tempfile.TemporaryDirectory() as d:
                recs, rc, _ = node_reference.run_umscope(cmd + ["--report", f"{d}/r.html", "--no-progress"], store,
                                                         left)
            for r in recs:
                emit({"type": "record", "figure": f.name, "tag": tag, "record": slim(r)})
        emit({"type": "command", "figure": f.name, "tag": tag, "command": show(cmd), "wall_s": round(time.time() - t1, 1),
              "exit": rc})


def probe_ctx(devices):
    from umscope import probe
    fp = probe.probe()
    gpus = fp.get("gpus") or []
    n = len(gpus) if devices == "all" else min(int(devices), len(gpus))
    g = gpus[0] if gpus else {}
    return {"gpus": n, "cpus": (fp.get("cpu") or {}).get("allowed_cpus") or os.cpu_count() or 1,
            "gpu": {k: g.get(k) for k in ("name", "l2_bytes", "total_mem", "sms")} if g else None,
            "addressing": g.get("addressing")}


# ------------------------------------------------------------------ pages


def load(path):
    """The JSON lines of a run -> (header, {figure: {"records", "profiles", "skips", "commands"}})."""
    header, figs = {}, {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if e["type"] == "header":
            header = e
            continue
        d = figs.setdefault(e["figure"], {"records": {}, "profiles": {}, "skips": [], "commands": []})
        if e["type"] == "record":
            d["records"].setdefault(e["tag"], []).append(e["record"])
        elif e["type"] == "profile":
            d["profiles"][e["tag"]] = e
        elif e["type"] == "skip":
            d["skips"].append(e)
        elif e["type"] == "command":
            d["commands"].append(e)
    return header, figs


BUDGET_SPENT = "not run: the figure's budget"  # the start of a skip's reason when the budget ran out
NOTHING = "Nothing was measured in this run"  # a page's body when no case was measured


def not_measured(d) -> list:
    """[(reason, [(what, its own detail or None)])]: what a figure did not measure, grouped by reason: the skipped
    or failed cases and profiles, the commands stopped at the time budget, and the skipped commands. Reasons that
    differ only in their numbers (each case's own counts) are one group: the words they share are its reason, and
    each case keeps the rest as its detail."""
    groups = {}

    def add(reason, what):
        groups.setdefault(re.sub(r"\d+(\.\d+)?", "#", reason), {}).setdefault(what, reason)
    for rs in d["records"].values():
        for r in rs:
            if not ok(r):
                add(f"{r.get('status')}: {r.get('reason')}", f"`{r.get('case_id')}`")
    for tag, p in d["profiles"].items():
        st = p.get("status") or {}
        if st.get("status") not in (None, "ok"):
            add(f"{st.get('status')}: {st.get('reason')}", f"profile of {tag}")
    for c in d["commands"]:
        if c.get("exit") == "timeout":
            add("stopped at the figure's time budget: what it had not recorded by then was not measured",
                c["command"])
    for s in d["skips"]:
        add(s["reason"], s["what"])
    out = []
    for cases in groups.values():
        reasons = list(cases.values())
        if len(set(reasons)) == 1:
            out.append((reasons[0], [(w, None) for w in cases]))
            continue
        common = os.path.commonprefix(reasons)
        common = common[:common.rfind(": ")] if ": " in common else ""
        out.append((common or "as each says", [(w, r[len(common):].lstrip(": ") if common else r)
                                              for w, r in cases.items()]))
    return out


def budget_cut(d) -> int:
    """The commands the time budget stopped or never started."""
    return sum(c.get("exit") == "timeout" for c in d["commands"]) + \
        sum(s["reason"].startswith(BUDGET_SPENT) for s in d["skips"])


def measured(d) -> bool:
    return any(ok(r) for rs in d["records"].values() for r in rs) or any(p.get("prof") for p in d["profiles"].values())


def not_measured_lines(name, d) -> list:
    """The page's "Not measured" section: each reason once, with what it stopped."""
    lines = []
    for reason, whats in not_measured(d):
        if len(whats) == 1:
            what, detail = whats[0]
            lines.append(f"- {_code(what)}: {detail or reason}")
        else:
            lines += [f"- {reason} ({len(whats)}):"] + [f"  - {_code(w)}{': ' + x if x else ''}" for w, x in whats]
    cut = budget_cut(d)
    if cut:
        lines += ["", f"{cut} command(s) cut by the time budget: `python3 bench/seeds.py --figures {name}` "
                  "completes it."]
    return lines


def _code(what):
    return what if what.startswith("`") or what.startswith("profile of") or what == "the figure" else f"`{what}`"


def page(f, header, d) -> tuple:
    """(markdown, {file name: svg}) of one figure."""
    ctx = dict(header.get("ctx") or {})
    d = dict(d, ctx=ctx)
    gpu = ctx.get("gpu") or {}
    src = sources()[f.study]
    head = [f"# {src['short']}, {f.figure}: {f.title}", "",
            f"Made by `{header.get('argv', 'bench/seeds.py')}` on `{header.get('kind')}` "
            f"({gpu.get('name', 'no GPU')}, {ctx.get('gpus', 0)} GPU(s) used), umscope commit "
            f"`{header.get('commit')}`, {header.get('date')}. The study: {src['cite']}; its machine: {src['system']}.",
            "", "Commands, in the order they ran (wall time, exit status):", ""]
    head += [f"- `{c['command']}` ({c['wall_s']} s, exit {c['exit']})" for c in d["commands"]] or ["- none ran"]
    body, charts = ([], {})
    if measured(d):
        body, charts = f.render(d)
    else:  # nothing to tabulate or chart: the page says so, and why (below)
        body = [f"{NOTHING}: every case was skipped or not run, for the reasons under Not measured below. No table "
                "and no chart."]
    files = {f"{f.name}{k}.svg": standalone_svg(v) for k, v in charts.items() if v}
    lines = head + ["", "## umscope's measurement", ""] + body
    lines += [""] + [f"![{f.figure}]({n})" for n in files]
    miss = not_measured_lines(f.name, d)
    if miss:
        lines += ["", "## Not measured", ""] + miss
    return "\n".join(lines) + "\n", files


def standalone_svg(text):
    """A chart as a file of its own: report/svg.py writes SVG for inline use in the report's HTML, where the
    namespace is implied; a file (an image in a Markdown page) needs it, or browsers show its XML source."""
    if "xmlns=" not in text.split(">", 1)[0]:
        text = text.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    return text


def write_pages(path, pages_dir):
    header, figs = load(path)
    out = Path(pages_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, d in figs.items():
        f = FIGURES.get(name)
        if f is None:
            continue
        text, files = page(f, header, d)
        (out / f"{name}.md").write_text(text)
        for fn, s in files.items():
            (out / fn).write_text(s)
        written.append(name)
    index(out)
    return written


INDEX_START, INDEX_END = "<!-- seeds pages: bench/seeds.py writes this list -->", "<!-- end of seeds pages -->"


def index(pages_dir):
    """Rewrites the list of figure pages in pages_dir/README.md: each figure with its page where one exists,
    else the command that makes it."""
    readme = Path(pages_dir) / "README.md"
    if not readme.exists():
        return
    text = readme.read_text()
    rows = ["| page | study, figure | GPUs | status |", "| --- | --- | ---: | --- |"]
    for name, f in FIGURES.items():
        page = Path(pages_dir) / f"{name}.md"
        made = page.exists()
        status = f"to be made: `bench/seeds.py --figures {name}`"
        if made:
            text_of_page = page.read_text()  # commands never started, and those stopped at the budget's end
            said = re.search(r"(\d+) command\(s\) cut by the time budget", text_of_page)
            cut = int(said[1]) if said else \
                text_of_page.count(BUDGET_SPENT) + text_of_page.count(", exit timeout)")  # a page before the count
            status = "page made" + ("; nothing measured (the page says why)" if NOTHING in text_of_page else "")
            if cut:
                status += f"; {cut} command(s) cut by the time budget: `bench/seeds.py --figures {name}` completes it"
        rows.append(f"| {f'[{name}]({name}.md)' if made else name} | {sources()[f.study]['short']}, {f.figure} | "
                    f"{max(f.gpus, 1)} | {status} |")
    block = INDEX_START + "\n\n" + "\n".join(rows) + "\n\n" + INDEX_END
    if INDEX_START in text and INDEX_END in text:
        text = text[:text.index(INDEX_START)] + block + text[text.index(INDEX_END) + len(INDEX_END):]
    else:
        text = text.rstrip("\n") + "\n\n## Pages\n\n" + block + "\n"
    readme.write_text(text)


# ------------------------------------------------------------------ main


def figure_list(spec) -> list:
    """Names from --figures: names, groups (single, multi, all); an unknown name raises ValueError."""
    out = []
    for w in [x.strip() for x in spec.split(",") if x.strip()]:
        if w in GROUPS:
            out += GROUPS[w]
        elif w in FIGURES:
            out.append(w)
        else:
            raise ValueError(f"unknown figure {w!r}: one of {', '.join(list(GROUPS) + list(FIGURES))}")
    if not out:
        raise ValueError("--figures names no figure")
    return list(dict.fromkeys(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", default="single", help="names, single, multi or all; 'list' prints them")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for the records and the log ($OUT)")
    ap.add_argument("--pages", help="write the pages (NAME.md, NAME.svg) here, e.g. docs/seeds")
    ap.add_argument("--render", metavar="JSONL", help="write the pages of a run's records (no GPU needed)")
    ap.add_argument("--kind", default="unnamed", help="the lent machine's kind, for the pages' provenance")
    ap.add_argument("--devices", default="all", help="GPUs to use: all (default) or a number")
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiply every figure's time budget")
    a = ap.parse_args(argv)
    if a.figures == "list":
        for n, f in FIGURES.items():
            print(f"{n:<18} {f.gpus} GPU(s) {f.budget:>4} s  {sources()[f.study]['short']}, {f.figure}: {f.title}")
        return 0
    try:
        names = figure_list(a.figures)
        if a.devices != "all" and int(a.devices) < 0:
            raise ValueError
        if not a.budget_scale > 0:
            raise ValueError("--budget-scale must be above 0")
    except ValueError as exc:
        sys.stderr.write(f"seeds.py: {exc or '--devices: all or a number'}\n")
        return 2
    if a.render:
        if not a.pages:
            sys.stderr.write("seeds.py: --render needs --pages DIR\n")
            return 2
        if not Path(a.render).is_file():
            sys.stderr.write(f"seeds.py: --render: no file {a.render}\n")
            return 2
        print("\n".join(f"{a.pages}/{n}.md" for n in write_pages(a.render, a.pages)))
        return 0
    if not a.out:
        sys.stderr.write("seeds.py: give --out DIR (or set $OUT)\n")
        return 2
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = probe_ctx(a.devices)
    jsonl, logf = out / f"seeds-{a.kind}.jsonl", open(out / f"seeds-{a.kind}.log", "a")
    sink = open(jsonl, "w")

    def emit(e):
        sink.write(json.dumps(e) + "\n")
        sink.flush()

    def log(msg):
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, file=sys.stderr, flush=True)
        logf.write(line + "\n")
        logf.flush()
    emit({"type": "header", "kind": a.kind, "commit": _commit(ROOT), "ctx": ctx,
          "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
          "argv": "python3 bench/seeds.py " + shlex.join(sys.argv[1:] if argv is None else argv)})
    plan = sum(FIGURES[n].budget * a.budget_scale for n in names if FIGURES[n].gpus <= ctx["gpus"])
    log(f"{len(names)} figures on {ctx['gpus']} GPU(s) ({(ctx['gpu'] or {}).get('name')}): at most {plan:.0f} s")
    times = {}
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            t = time.time()
            run_figure(FIGURES[n], ctx, f"{d}/seeds.sqlite", FIGURES[n].budget * a.budget_scale, emit, log)
            times[n] = time.time() - t
    sink.close()
    if a.pages:
        write_pages(jsonl, a.pages)
    _, figs = load(jsonl)
    print(f"\n{'figure':<18} {'status':<34} {'commands':>8} {'records':>8} {'s':>6}")
    for n in names:
        d = figs.get(n, {"records": {}, "profiles": {}, "skips": [], "commands": []})
        recs = [r for rs in d["records"].values() for r in rs] + list(d["profiles"].values())
        good = sum(1 for r in recs if ok(r) or r.get("type") == "profile" and r.get("prof"))
        status = "skipped: " + d["skips"][0]["reason"][:25] if not d["commands"] and d["skips"] else \
            f"{good} measured, {sum(len(w) for _, w in not_measured(d))} not"
        print(f"{n:<18} {status:<34} {len(d['commands']):>8} {len(recs):>8} {times[n]:>6.0f}")
    print(f"records: {jsonl}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
