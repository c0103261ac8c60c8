"""The node reference's document (bench/node_reference.py): each step's section rendered from its records, the
topology from the probe, the copy matrices, ping-pong, latency, NCCL, MPI and the anchors' comparison, and the
whole document with its provenance and run time. Split from node_reference.py, which runs the steps; nothing
here measures."""
import shlex

def field(r, key):
    """A record's field from its own column or its extra fields."""
    if r.get(key) is not None:
        return r[key]
    extra = r.get("extra")
    return extra.get(key) if isinstance(extra, dict) else None


def fmt(x, digits=4) -> str:
    if x is None:
        return "—"
    if abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def fig(r) -> str:
    """'396.2 GB/s (395.8–396.5)': the median with min–max and unit, as recorded."""
    if r is None:
        return "not measured"
    if r.get("status") not in (None, "ok"):
        return f"{r.get('status')}: {r.get('reason')}"
    return f"{fmt(r.get('median'))} {r.get('unit')} ({fmt(r.get('min'))}–{fmt(r.get('max'))})"


def kind_spec(r) -> str:
    """The record's memory kind as the command line spells it: 'kind' or 'kind,policy'."""
    return r.get("kind") + (f",{r['policy']}" if r.get("policy") else "")


def size_text(n) -> str:
    from umscope.sizes import format_size
    return "—" if n is None else format_size(n)


def bound_text(r) -> str:
    b, src = field(r, "bound"), field(r, "bound_source")
    if b is None:
        return "no bound recorded"
    eff = ""
    if r.get("median") is not None and b:
        eff = f", median {100 * r['median'] / b:.0f}% of it"
    return f"{b:g} {r.get('unit') or ''} ({src}{eff})"


def _peer(kind):
    return int(kind[5:]) if kind and kind.startswith("peer:") else None


def case_params(case_id) -> dict:
    """'copy peer:1 bytes=1GiB device=1 dst=device' -> {'benchmark': 'copy', 'kind': 'peer:1', 'bytes': '1GiB',
    'device': '1', 'dst': 'device'} (the case id is the benchmark, the kind, then sorted key=value)."""
    words = (case_id or "").split(" ")
    out = {"benchmark": words[0] if words else None}
    for i, w in enumerate(words[1:]):
        key = w.split("=", 1)[0]
        if i == 0 and ("=" not in w or "," in key or ":" in key):
            out["kind"] = w  # 'device', 'peer:1', 'managed,first_touch=gpu'
        elif "=" in w:
            out[key] = w.split("=", 1)[1]
    return out


def copy_cells(records) -> dict:
    """{(engine, route, a, b): record}: route 'write' = GPU a's memory into GPU b's issued by a (device ->
    peer:b on a), 'read' = b's memory into a's issued by a (peer:b -> device on a), 'both' = both ways
    at once between a and b (on a, with b issuing its own direction where the engine is CE). The GPU and
    the memories come from the case id, so that a skipped case lands in its cell with its reason."""
    out = {}
    for r in records:
        if r.get("benchmark") != "copy":
            continue
        p = case_params(r.get("case_id"))
        src, dst = p.get("kind") or r.get("kind") or "", p.get("dst") or field(r, "dst_kind") or ""
        a = int(p.get("device", field(r, "device") if field(r, "device") is not None else 0))
        engine = "CE" if p.get("engine", (r.get("op") or "ce")[:2]) == "ce" else "SM"
        direction = p.get("direction") or field(r, "direction")
        ok = r.get("status") in (None, "ok")
        if direction == "uni" and src == "device" and _peer(dst) is not None:
            out[(engine, "write", a, _peer(dst))] = r
        elif direction == "uni" and _peer(src) is not None and dst == "device":
            out[(engine, "read", a, _peer(src))] = r
        elif direction == "bidir" and _peer(src) is not None and (not ok or field(r, "route") == "both"):
            out[(engine, "both", a, _peer(src))] = r
    return out


# ---------------------------------------------------------------- rendering


def _matrix(n, cells, engine, route, title):
    head = "| " + title + " | " + " | ".join(f"GPU {b}" for b in range(n)) + " |"
    lines = [head, "| --- |" + " ---: |" * n]
    for a in range(n):
        row = []
        for b in range(n):
            if a == b:
                row.append("—")
            else:
                r = cells.get((engine, route, a, b))
                row.append(fig(r) if r is not None else "not run")
        lines.append(f"| GPU {a} | " + " | ".join(row) + " |")
    return lines


def render_topology(fp) -> list:
    from umscope.report.topology import link_text, p2p_text, ranges
    from umscope.model import bounds
    topo = fp.get("topology") or {}
    pairs = {(p["a"], p["b"]): p for p in topo.get("pairs", [])}
    lines = ["| pair | link | P2P | common ancestor | bound per direction (source) |", "| --- | --- | --- | --- | --- |"]
    for (a, b), p in sorted(pairs.items()):
        bd = bounds.peer_link(fp, a, b)
        anc = (p.get("common_ancestor") or {}).get("text") or "—"
        lines.append(f"| GPU {a} → GPU {b} | {link_text(p)} | {p2p_text(p)} | {anc} | "
                     + (f"{bd[0]:g} GB/s ({bd[1]})" if bd else "no bound") + " |")
    lines += ["", "| GPU | name | PCI bus | NUMA node | local CPUs | NVLinks | source |",
              "| --- | --- | --- | --- | --- | ---: | --- |"]
    names = {g["device"]: g.get("name") for g in fp.get("gpus") or []}
    for g in topo.get("gpus", []):
        lines.append(f"| {g['device']} | {names.get(g['device'], '?')} | {g.get('pci_bus_id')} | "
                     f"{g.get('numa_node') if g.get('numa_node') is not None else 'unknown'} | "
                     f"{ranges(g.get('cpus')) if g.get('cpus') else 'unknown'} | {g.get('nvlinks', 0)} | "
                     f"{g.get('source') or ''} |")
    nodes = fp.get("numa") or []
    if nodes:
        lines += ["", "Host NUMA nodes: " + "; ".join(
            f"node {x['id']}: CPUs {ranges(x.get('cpus'))}" for x in nodes) + "."]
    if topo.get("why_no_nvml"):
        lines += ["", f"NVML unavailable: {topo['why_no_nvml']}"]
    return lines


def render_copy(n, records) -> list:
    cells = copy_cells(records)
    lines = ["Rows: the GPU that issues the copy (its copy engines, CE, or its SMs); columns: the other GPU. "
             "Each cell: median (min–max) over the repetitions, 1 GiB per copy unless the command says "
             "otherwise.", ""]
    for engine, what in (("CE", "copy engines"), ("SM", "SMs")):
        for route, desc in (("write", "row GPU's memory → column GPU's (pushed)"),
                            ("read", "column GPU's memory → row GPU's (pulled)"),
                            ("both", "both ways at once")):
            lines += [f"**{what}, {desc}**", ""]
            lines += _matrix(n, cells, engine, route, "issued by")
            lines.append("")
    lines += ["Bounds per pair, as the records give them (the CE write record of each ordered pair; both-ways "
              "rows carry their own):", "", "| pair | bound (source) | both ways: bound (source) |",
              "| --- | --- | --- |"]
    for a in range(n):
        for b in range(n):
            if a != b:
                w, bo = cells.get(("CE", "write", a, b)), cells.get(("CE", "both", a, b))
                lines.append(f"| GPU {a} → GPU {b} | {bound_text(w) if w else 'not run'} | "
                             f"{bound_text(bo) if bo else 'not run'} |")
    return lines


def render_pingpong(records) -> list:
    lines = ["| pair | flag in | round trip | notes |", "| --- | --- | ---: | --- |"]
    for r in records:
        if r.get("benchmark") != "pingpong":
            continue
        p = case_params(r.get("case_id"))
        if r.get("status") not in (None, "ok"):
            lines.append(f"| gpu{p.get('device', 0)}-gpu{p.get('peer', '?')} | {p.get('kind') or r.get('kind')} | "
                         f"{r.get('status')} | {r.get('reason')} |")
            continue
        where = kind_spec(r)
        lines.append(f"| {r.get('processor')} | {where} | {fig(r)} | {field(r, 'exchanges')} exchanges × "
                     f"{r.get('n')} reps; {field(r, 'atomics_check')} |")
    return lines


def render_latency(records) -> list:
    lines = ["| chasing GPU | memory (residency) | size | load-to-use latency |", "| --- | --- | ---: | ---: |"]
    for r in records:
        if r.get("benchmark") != "latency":
            continue
        if r.get("status") not in (None, "ok"):
            lines.append(f"| {r.get('case_id')} | | | {r.get('status')}: {r.get('reason')} |")
            continue
        if r.get("op") != "chase":
            continue
        where = kind_spec(r)
        res = field(r, "residency")
        lines.append(f"| {r.get('processor')} | {where}{f' ({res})' if res else ''} | {size_text(r.get('bytes'))} | "
                     f"{fig(r)} |")
    return lines


def link_bound(fp):
    """(GB/s, source) of the slowest GPU pair's link per direction, from the probe (umscope's model of
    bounds): what a collective's busbw is compared with (nccl-tests' busbw is per-link traffic)."""
    from umscope.model import bounds
    devs = [g["device"] for g in fp.get("gpus") or []]
    found = [bounds.peer_link(fp, a, b) for a in devs for b in devs if a != b]
    found = [b for b in found if b]
    return min(found) if found else None


def render_nccl(records, fp=None) -> list:
    bound = link_bound(fp or {})
    lines = ["| op | buffers | size | busbw median (min–max) | of link bound | algbw median | ranks | verified |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    libs, launch = set(), set()
    for r in records:
        if r.get("benchmark") != "nccl":
            continue
        if r.get("status") not in (None, "ok"):
            lines.append(f"| {r.get('case_id')} | | | {r.get('status')}: {r.get('reason')} | | | | |")
            continue
        libs.add(f"NCCL {field(r, 'nccl_version')} ({field(r, 'nccl_library')}), NCCL_NVLS_ENABLE="
                 f"{field(r, 'nccl_nvls_enable')!r} as the family saw it")
        launch.add(f"{field(r, 'launch')}" + (f" ({field(r, 'launcher')})" if field(r, "launcher") else ""))
        kind = kind_spec(r)
        algbw = field(r, "algbw")
        of = f"{100 * r['median'] / bound[0]:.0f}%" if bound and r.get("median") is not None else "—"
        gpus = f" (GPUs {field(r, 'gpus')})" if field(r, "launch") == "single" and field(r, "gpus") else ""
        lines.append(f"| {r.get('op')} | {kind} | {size_text(r.get('bytes'))} | {fig(r)} | {of} | "
                     f"{fmt(algbw) + ' GB/s' if algbw is not None else '—'} | {field(r, 'ranks')}{gpus} | "
                     f"{field(r, 'verified')} |")
    if libs:
        lines += ["", "Library: " + "; ".join(sorted(libs)) + ". Launch: " + "; ".join(sorted(launch)) + "."]
    lines += ["", "Link bound: " + (f"{bound[0]:g} GB/s per direction ({bound[1]}), the slowest GPU pair's; "
                                    "'of link bound' is busbw median / it." if bound else
                                    "none known (the probe gave no peer-link bound); no percentage.")]
    return lines


def render_mpi(records) -> list:
    lines = ["| buffers | op | size | median (min–max) | pointers | verified |", "| --- | --- | ---: | ---: | --- | --- |"]
    libs = set()
    for r in records:
        if r.get("benchmark") != "mpi":
            continue
        if r.get("status") not in (None, "ok"):
            lines.append(f"| {r.get('kind') or r.get('case_id')} | | | {r.get('status')}: {r.get('reason')} | | |")
            continue
        libs.add(f"{field(r, 'mpi_library')}; CUDA-aware: {field(r, 'cuda_aware')} ({field(r, 'cuda_aware_why')}); "
                 f"launcher `{field(r, 'launcher')}`")
        k = field(r, "pairs")
        op = r.get("op") + (f" ({k} pair{'' if str(k) == '1' else 's'})" if r.get("op") == "mbw" else "")
        kind = kind_spec(r)
        lines.append(f"| {kind} | {op} | {size_text(r.get('bytes'))} | {fig(r)} | {field(r, 'pointers')} | "
                     f"{field(r, 'verified')} |")
    if libs:
        lines += ["", "MPI: " + " / ".join(sorted(libs)) + "."]
    ran, skipped = {}, {}
    for r in records:
        if r.get("benchmark") != "mpi":
            continue
        kind = case_params(r.get("case_id")).get("kind") or r.get("kind")
        if r.get("status") in (None, "ok"):
            ran.setdefault(kind, set()).add(f"{field(r, 'pointers')} pointers")
        else:
            skipped[kind] = f"{r.get('status')}: {r.get('reason')}"
    if ran or skipped:
        lines += ["", "What ran: " + ("; ".join(f"{k} ({', '.join(sorted(v))})" for k, v in ran.items()) or "nothing")
                  + ". Skipped: " + ("; ".join(f"{k} ({why})" for k, why in skipped.items()) or "nothing") + "."]
    return lines


def render_torch(res, nccl_records=()) -> list:
    if res and res.get("markdown"):  # bench/scaleout.py's tables, its headings one level down
        return [("#" + line if line.startswith("## ") else line) for line in res["markdown"].splitlines()
                if not line.startswith("# ")]
    return _render_torch_ops(res, nccl_records)


def _render_torch_ops(res, nccl_records=()) -> list:
    """torch's busbw per collective beside umscope's (the one-process nccl record of the same op, device
    buffers and size) and their ratio, umscope / torch."""
    if not res or "error" in res:
        return [f"Not measured: {(res or {}).get('error', 'not run')}"]
    ours = {(r.get("op"), r.get("bytes")): r for r in nccl_records
            if r.get("benchmark") == "nccl" and r.get("kind") == "device" and r.get("status") in (None, "ok")}
    lines = [f"torch {res['torch']} with NCCL {res['nccl']}, {res['world']} processes (torch.multiprocessing), "
             "device buffers, CUDA events around one call, the slower rank per sample (bench/scaleout.py's "
             "ranks); umscope: the one-process NCCL table above.", "",
             "| collective | size | torch busbw median (min–max) | umscope busbw median (min–max) | umscope / torch |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for op, (med, lo, hi, used) in res["ops"].items():
        r = ours.get((op, used))
        ratio = f"{r['median'] / med:.3f}" if r is not None and med else "—"
        lines.append(f"| {op} | {size_text(used)} | {fmt(med)} GB/s ({fmt(lo)}–{fmt(hi)}) | "
                     f"{fig(r) if r is not None else 'no record of that size'} | {ratio} |")
    return lines


TITLES = {"info": "Topology — `umscope info`", "copy": "Peer copy matrix — `umscope bench copy`",
          "pingpong": "Ping-pong across GPUs — `umscope bench pingpong`",
          "latency": "Latency across GPUs — `umscope bench latency`",
          "nccl": "NCCL, one process driving every GPU — `umscope bench nccl`",
          "nccl-mpi": "NCCL, one rank per GPU under mpirun — `umscope bench nccl --launcher mpirun`",
          "mpi": "MPI point-to-point, one rank per GPU — `umscope bench mpi`",
          "torch": "Anchors side by side: OSU 7.2, nccl-tests 2.19.6, PyTorch — `bench/scaleout.py --quick`"}


def scaleout_argv(torch_cmd, out) -> list:
    """bench/scaleout.py's command line for the planned torch step (its --reps, and --anchors where the
    step names one; steps recorded before it did ran with the default .anchors)."""
    opt = lambda k, d: torch_cmd[torch_cmd.index(k) + 1] if k in torch_cmd else d  # noqa: E731
    return ["bench/scaleout.py", "--quick", "--skip", "host", "--reps", str(opt("--reps", "10")),
            "--anchors", opt("--anchors", ".anchors"), "--out", out]


def show(argv) -> str:
    """The command as the document prints it: `umscope ...`, the store path elided; the torch step as the
    bench/scaleout.py command it ran (its output folder a temporary DIR)."""
    if argv[0] == "torch":
        return "python3 " + " ".join(shlex.quote(x) for x in scaleout_argv(argv, "DIR"))
    out, skip = [], False
    for x in argv:
        if skip:
            out.append("STORE")
            skip = False
            continue
        skip = x == "--store"
        out.append(x)
    if argv[0] == "bench" and "--store" not in argv:
        out += ["--json", "--store", "STORE"]  # as run_umscope adds them
    return "umscope " + " ".join(shlex.quote(x) for x in out)


def kept_sections(text: str, titles=None) -> list:
    """The level-2 sections of an earlier document that this script does not make (their titles are not
    among TITLES), or only those whose title starts with one of `titles`, verbatim with their own
    provenance: e.g. a hand-made section of an earlier reference."""
    ours = {t.split(" — ")[0] for t in TITLES.values()}
    out = []
    for p in text.split("\n## ")[1:]:
        title = p.split("\n", 1)[0]
        if title.split(" — ")[0] in ours or (titles and not any(title.startswith(t) for t in titles)):
            continue
        out.append("## " + p.rstrip() + "\n")
    return out


def run_time(meta, results) -> str:
    """The run's own time: the whole run's (probe included) where the records file has its end line, else
    what its steps' times add up to, said as such (a run cut off before its end, or one recorded before the
    end line was written)."""
    steps = sum(r.get("wall") or 0.0 for r in results.values())
    ran = len([r for r in results.values() if not r.get("not_run")])
    if meta.get("wall") is not None:
        return (f"Run time: {meta['wall']:.0f} s in one call, from the probe to the last step (expected "
                f"{meta.get('expected', '?')} s; the {ran} steps that ran took {steps:.0f} s of it).")
    return (f"Run time: the {ran} steps that ran took {steps:.0f} s in all, by their own wall times (the "
            "records file has no end line, so the whole run's time, probe included, is not in it).")


def render(meta, fp, results, n, pairs, ranks) -> str:
    """The whole document from the probe and each step's {cmds, records, rc, wall, when}."""
    g = (fp.get("gpus") or [{}])[0]
    env = ", ".join(f"`{k}={v}`" for k, v in sorted(meta["env"].items())) or "none"
    lines = [f"# Reference measurements: {n} × {g.get('name', 'GPU')} (`{meta['kind']}`, scale-out within a node)",
             "",
             f"Provenance: umscope commit `{meta['commit']}`, machine kind `{meta['kind']}` ({n} × {g.get('name')}, "
             f"driver {(fp.get('cuda') or {}).get('driver')}, host {fp.get('host', {}).get('hostname')}, "
             f"{(fp.get('cpu') or {}).get('logical_cpus')} CPUs), {meta['date']}; multicast-off variables seen: "
             f"{env} (NCCL_NVLS_ENABLE=0 checked before any step; nothing here creates a multicast object). Written by `{meta['argv']}` (bench/node_reference.py) in one call: it runs umscope's own "
             "commands (each with `--json --store STORE`) and copies their records; every figure is a "
             "record's median with its min–max over the repetitions, its unit, and the bound with its source "
             "where the record has one (the percentage is median / that bound). Raw records: "
             f"`{meta['records']}`.", ""]
    lines += [run_time(meta, results), ""]
    for note in meta.get("notes") or []:  # each its own paragraph
        lines += [note, ""]
    renderers = {"copy": lambda recs: render_copy(n, recs), "pingpong": render_pingpong, "latency": render_latency,
                 "nccl": lambda recs: render_nccl(recs, fp), "nccl-mpi": lambda recs: render_nccl(recs, fp),
                 "mpi": render_mpi}
    for name, title in TITLES.items():
        if name not in results and name == "torch" and not meta.get("torch"):
            continue
        lines += [f"## {title}", ""]
        res = results.get(name)
        if res is None or res.get("not_run"):
            lines += [f"Not measured: {res['not_run'] if res else 'the run ended before this step'}.", ""]
            continue
        cmds = "; ".join(f"`{show(c)}`" for c in res["cmds"])
        lines += [f"Provenance: umscope commit `{meta['commit']}`, machine kind `{meta['kind']}`, command {cmds}, "
                  f"{res['when']}; exit status {res['rc']}, {res['wall']:.0f} s.", ""]
        if name == "info":
            lines += render_topology(fp)
        elif name == "torch":
            lines += render_torch(res.get("torch"), (results.get("nccl") or {}).get("records") or [])
        else:
            lines += renderers[name](res["records"])
        if name == "pingpong" and pairs["mode"] == "star":
            lines += ["", "Pairs: each pair with GPU 0" + (" plus the disjoint pair (2, 3)" if n >= 4 else "")
                      + " (--pairs star), not every pair."]
        if name == "latency" and pairs["mode"] == "star":
            lines += ["", "Pairs: GPU 0 chasing each other GPU's memory" + (", and GPU 2 chasing GPU 3's"
                                                                             if n >= 4 else "") + " (--pairs star)."]
        if name == "mpi":
            lines += ["", f"{ranks['mpi']} ranks, one per GPU (rank r on GPU r mod {n}); bw, bibw and latency run "
                      f"between rank 0 and rank {ranks['mpi'] // 2}"
                      + (f", mbw over 1 to {ranks['mpi_pairs']} pairs at once (rank i with i + {ranks['mpi'] // 2})"
                         if ranks["mpi_pairs"] >= 2 else "; mbw (several pairs at once) needs four ranks or more")
                      + ("; the last rank is idle (odd N)" if ranks["idle"] else "")
                      + ". A kind the machine's MPI cannot pass (device buffers without a CUDA-aware MPI) is "
                      "a skip with the family's reason, in the table."]
        if res.get("error"):
            lines += ["", f"Stopped: {res['error']}"]
        lines.append("")
    for sec in meta.get("kept") or []:
        lines += [sec.rstrip(), "", f"(Kept verbatim from `{meta['keep']}`: not made by this script.)", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- running
