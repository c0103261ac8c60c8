"""Stores to draw reports from without a GPU: stored H100/H200 records from docs/ put into runs as `umscope` writes
them (default, quick, interrupted, 2-GPU NCCL), a failed `place` run, and a SYNTHETIC profile run whose trace
migrates 8 GiB (made by make_trace: not a measurement; every figure in it comes from the generator below).

`python tests/report_fixtures.py DIR` writes the stores and their reports into DIR (for the Chromium check)."""

import json
import sys
from collections import OrderedDict
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _h100_fp(meta_gpu="NVIDIA H100 80GB HBM3", host="h100-node"):
    return {"host": {"hostname": host, "kernel": "6.8", "os": "Linux", "page_size": 4096, "thp": "madvise",
                     "memory": {"MemTotal": 128 << 30}},
            "cpu": {"model": "Intel Xeon Platinum 8480+", "arch": "x86_64", "logical_cpus": 16, "sockets": 1,
                    "physical_cores": 16, "caches": []},
            "numa": [{"id": 0, "mem_bytes": 128 << 30, "cpus": list(range(16))}],
            "cuda": {"runtime_version": 13000, "driver": "580"},
            "gpus": [{"device": 0, "name": meta_gpu, "compute_capability": "9.0", "sms": 132, "total_mem": 80 << 30,
                      "l2_bytes": 50 << 20, "pci_bus_id": "0000:19:00.0", "addressing": "none"}]}


def _stored(path):
    """Records of a docs/ JSON-lines file (the lines with a benchmark) and its meta line."""
    recs, meta = [], {}
    for line in open(path):
        d = json.loads(line)
        if d.get("_tag") == "meta":
            meta = d
        if d.get("benchmark") and (d.get("type") == "record" or "run_id" in d):
            recs.append(d)
    return recs, meta


def _case_of(r):
    from umscope.suite import Case
    x = r.get("extra") or r
    params = {"mode": x.get("mode")} if r.get("op") == "app" else {}
    return Case(r["benchmark"], r.get("kind"), params)


def _flat(r):
    """A record as umbench prints it (the store's extra fields at the top level)."""
    out = {k: v for k, v in r.items() if k not in ("extra", "id", "run_id", "case_id")}
    out.update(r.get("extra") or {})
    return out


def _by_case(recs):
    cases = OrderedDict()
    for r in recs:
        c = _case_of(r)
        cases.setdefault(c.case_id, (c, []))[1].append(_flat(r))
    return list(cases.values())


def default_run(store, quick=False, interrupt_after=None):
    """The H100 records of docs/model-validation-raw.jsonl as one `umscope run` (quick: its applications at
    two modes only; interrupt_after=N: the first N cases stored, then SIGTERM during the next)."""
    from umscope.suite import plan_to_json
    recs, meta = _stored(DOCS / "model-validation-raw.jsonl")
    if quick:
        recs = [r for r in recs if r.get("op") != "app" or (r.get("mode") in ("explicit", "managed"))]
    groups = _by_case(recs)
    fp = _h100_fp(meta.get("gpu") or "NVIDIA H100 80GB HBM3")
    cmd = "umscope run --quick" if quick else "umscope run"
    run = store.create_run("run", cmd, plan_to_json([c for c, _ in groups]), {}, fp)
    for i, (case, rs) in enumerate(groups):
        if interrupt_after is not None and i >= interrupt_after:
            store.finish_run(run, "interrupted")
            store.note_interruption(run, "SIGTERM", case.case_id)
            return run
        store.add_case_result(run, case, "ok", "", 0, 1, rs)
    store.finish_run(run, "complete")
    return run


def nccl_run(store):
    """The 2 × H200 node reference of docs/reference-h200x2.jsonl (copies, latency, NCCL, MPI) as one run."""
    from umscope.suite import plan_to_json
    fp, recs = None, []
    for line in open(DOCS / "reference-h200x2.jsonl"):
        d = json.loads(line)
        if d.get("node_reference") == "fingerprint":
            fp = d["fingerprint"]
        elif d.get("benchmark") and d.get("status") == "ok":
            recs.append(d)
    groups = OrderedDict()
    from umscope.suite import Case
    for r in recs:
        groups.setdefault(r["case_id"], (Case(r["benchmark"], r.get("kind"), {"id": r["case_id"]}), []))[1].append(
            _flat(r))
    run = store.create_run("bench nccl", "umscope bench nccl --devices 0,1",
                           plan_to_json([c for c, _ in groups.values()]), {}, fp)
    for case, rs in groups.values():
        store.add_case_result(run, case, "ok", "", 0, 1, rs)
    store.finish_run(run, "complete")
    return run


def failed_place_run(store):
    from umscope.place import records_from_stats
    from umscope.suite import Case
    stats = [(4242, {"kinds": {"managed": {"requested_bytes": 6 << 30, "peak_live_bytes": 5 << 30, "requests": 310}},
                     "total": {"refused": 1, "requests": 311, "requested_bytes": 6 << 30, "peak_live_bytes": 5 << 30},
                     "rules": [], "refusals": [{"bytes": 90 << 30, "why": "more than the GPU has free"}]})]
    recs = records_from_stats(stats)
    recs.append({"benchmark": "place", "op": "run", "processor": "host", "kind": "managed", "policy": "",
                 "metric": "wall_time", "unit": "s", "n": 1, "median": 19.7, "min": 19.7, "max": 19.7,
                 "value": 19.7, "command": "python train.py --steps 10", "exit_status": 1, "kind_spec": "managed",
                 "rules": [], "stdout_tail": "step 1\n", "notes": [],
                 "stderr_tail": "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
                                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 90.00 GiB\n"})
    run = store.create_run("place", "umscope place --kind managed -- python train.py --steps 10", [],
                           {"kind": "managed"}, _h100_fp())
    store.add_case_result(run, Case("place", "managed", {"command": "python train.py --steps 10"}), "failed",
                          "the program exited with status 1", 0, 19.7, recs)
    store.finish_run(run, "complete")
    return run


GIB = 1 << 30


def make_trace(path, migrate=8 * GIB, chunk=2 << 20, kernels=20000, allocs=4):
    """SYNTHETIC libumtrace lines: `allocs` managed allocations sharing `migrate` bytes, migrated in `chunk`
    pieces (a quarter prefetched, the rest on demand, an eighth evicted back), one GPU fault event of 16 faults
    per on-demand chunk, `kernels` kernels and NVTX ranges; over 20 s of trace time. Returns the totals made."""
    t0 = 1_000_000_000
    span = 20_000_000_000
    lines = [json.dumps({"k": "start", "t": t0}), json.dumps({"k": "device", "id": 0, "bus": "0000:19:00.0"})]
    per = migrate // allocs
    base = 1 << 40
    for i in range(allocs):
        lines.append(json.dumps({"k": "mem", "op": 1, "mk": 3, "a": base + i * per, "b": per, "t": t0 + 1}))
    n = migrate // chunk
    made = {"htod": 0, "dtoh": 0, "gpu_fault": 0, "kernels": kernels, "prefetch": 0}
    for j in range(n):
        t = t0 + span * j // n
        addr = base + j * chunk
        prefetch = j % 4 == 0
        lines.append(json.dumps({"k": "um", "c": 1, "v": chunk, "s": t, "e": t + 1000, "a": addr, "src": 0, "dst": 1,
                                 "f": 3 if prefetch else 2}))
        made["htod"] += chunk
        made["prefetch"] += chunk if prefetch else 0
        if not prefetch:
            lines.append(json.dumps({"k": "um", "c": 4, "v": 16, "s": t - 500, "e": t, "a": addr, "src": 0,
                                     "dst": 0, "f": 2}))
            made["gpu_fault"] += 16
        if j % 8 == 0:
            lines.append(json.dumps({"k": "um", "c": 2, "v": chunk, "s": t + 2000, "e": t + 3000, "a": addr,
                                     "src": 1, "dst": 0, "f": 4}))
            made["dtoh"] += chunk
    for k in range(kernels):
        s = t0 + span * k // kernels
        lines.append(json.dumps({"k": "kernel", "d": 0, "s": s, "e": s + span // kernels // 2, "n": "triad_kernel"}))
    for k in range(4):
        lines.append(json.dumps({"k": "memcpy", "d": 0, "b": 64 << 20, "ck": 1, "s": t0 + k * 100_000_000,
                                 "e": t0 + k * 100_000_000 + 30_000_000}))
    lines += [json.dumps({"k": "marker", "fl": 2, "t": t0 + 100, "id": 1, "n": "load"}),
              json.dumps({"k": "marker", "fl": 4, "t": t0 + span // 5, "id": 1, "n": None}),
              json.dumps({"k": "marker", "fl": 2, "t": t0 + span // 5, "id": 2, "n": "train"}),
              json.dumps({"k": "marker", "fl": 4, "t": t0 + span, "id": 2, "n": None}),
              json.dumps({"k": "end", "um_records": []})]
    Path(path).write_text("\n".join(lines) + "\n")
    return made


def profile_run(store, tmp_dir, migrate=8 * GIB):
    """A profile run of the SYNTHETIC trace above, with sampled memory, utilisation and power every 10 ms."""
    from umscope.profile.output import _records, trace_records
    from umscope.profile.tracer import parse_trace
    from umscope.suite import Case
    path = Path(tmp_dir) / "synthetic-umtrace.jsonl"
    made = make_trace(path, migrate)
    tr = parse_trace(path)
    tr["clock"] = "program"

    class Sampled:
        period, samples, cpu_s = 0.01, 2000, 0.05
        series = {"rss": [(i * 0.01, (1 << 30) + i * (1 << 20)) for i in range(2000)],
                  "gpu0_mem_device": [(i * 0.01, min(migrate, i * migrate // 1500)) for i in range(2000)],
                  "gpu0_util": [(i * 0.01, 90 if i % 50 else 40) for i in range(2000)],
                  "gpu0_power": [(i * 0.01, 400 + (i % 100)) for i in range(2000)]}
    recs = _records(["python", "train.py"], Sampled, 20.0, 0, 0, {}, [], "") + trace_records(tr)
    fp = _h100_fp()
    run = store.create_run("profile", "umscope profile --um-trace -- python train.py", [], {"um_trace": True}, fp)
    store.add_case_result(run, Case("profile", None, {"command": "python train.py"}), "ok", "", 0, 20.0, recs)
    store.finish_run(run, "complete")
    return run, made


def build_all(out_dir):
    """Every page of the Chromium check: (name, store path, run id, report path)."""
    from umscope.report.html import write_report
    from umscope.store import Store
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = []
    for name, make in (("default", lambda s: default_run(s)), ("quick", lambda s: default_run(s, quick=True)),
                       ("interrupted", lambda s: default_run(s, interrupt_after=40)),
                       ("place-failed", failed_place_run), ("nccl-2gpu", nccl_run),
                       ("profile-8gib", lambda s: profile_run(s, out_dir)[0])):
        s = Store(out_dir / f"{name}.sqlite")
        run = make(s)
        pages.append((name, s.path, run, write_report(s, run, out_dir / f"{name}.html")))
    return pages


if __name__ == "__main__":
    for name, _, run, path in build_all(sys.argv[1]):
        print(f"{name:14} run {run}: {path} ({path.stat().st_size / 1e6:.2f} MB)")
