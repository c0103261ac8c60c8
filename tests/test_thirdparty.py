"""bench/thirdparty.py (issue 39, advise unmodified programs) on the CPU: the advice's classification from real
`umscope advise --trace --json` output, the whole `run` flow with stand-in programs and tracer, the table, bad input,
and `umscope profile --keep-trace`."""
import importlib.util
import json
import pathlib
import sys

import pytest

from umscope import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("thirdparty", ROOT / "bench" / "thirdparty.py")
tp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tp)
BASE, MIB = 1 << 40, 1 << 20
PREFETCH = {"binary": "bin/pathfinder-prefetch", "program": "pathfinder", "mode": "managed-prefetch", "how": "DEF=-DPREF"}
PLAIN = {"binary": "bin/nw", "program": "nw", "mode": None, "how": "managed"}


def write_trace(path, kernels=1, cpu_reads=False, step_ns=13000):
    """libumtrace lines: one 64 MiB managed allocation the GPU faults in 64 KiB at a time in each of `kernels`
    kernels (re-faulting it each time), optionally read back by the CPU. Each fault and its migration take step_ns
    (13 us: 64 KiB at 5 GB/s, a demand-faulted first pass as fast as UVMBench's on an H200); step_ns=3: a run
    whose migrations cost nothing."""
    recs, t = [{"k": "mem", "op": 1, "a": BASE, "b": 64 * MIB}], 10
    q = max(1, step_ns // 13)
    for _ in range(kernels):
        k0 = t
        for off in range(0, 64 * MIB, 65536):
            recs += [{"k": "um", "c": 4, "v": 1, "s": t, "e": t + q, "a": BASE + off, "f": 1},
                     {"k": "um", "c": 1, "v": 65536, "s": t + q, "e": t + step_ns - q, "a": BASE + off, "f": 2}]
            t += step_ns
        recs.append({"k": "kernel", "s": k0, "e": t + 1})
        t += 5
    if cpu_reads:
        recs += [{"k": "um", "c": 3, "v": 1, "s": t + i, "e": t + i + 1, "a": BASE + i * 4096, "f": 0}
                 for i in range(64 * MIB // 4096)]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return path


def advise(path, capsys):
    assert cli.main(["advise", "--trace", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_advice_classified_from_real_advise_output(tmp_path, capsys):
    from umscope.model.driver import HINTS, REMOTE_BOUND
    once = advise(write_trace(tmp_path / "a.jsonl"), capsys)  # read once: zero-copy modelled fastest, a lower bound
    again = advise(write_trace(tmp_path / "b.jsonl", kernels=5), capsys)  # re-faulted 5 times: prefetch
    idle = advise(write_trace(tmp_path / "c.jsonl", step_ns=3), capsys)  # migrations that cost nothing: managed
    assert (once["recommended"], again["recommended"], idle["recommended"]) == ("managed-prefetch", "managed-prefetch",
                                                                                "managed")
    # From a trace, remote access is priced but never recommended: zerocopy measured 3x slower than plain managed
    # memory for nw and gaussian (H200, session 17) where it was modelled 12.8x and 28x faster
    zc = once["evidence"]["zerocopy"]
    assert zc["modelled_ms"] < once["evidence"]["managed-prefetch"]["modelled_ms"]
    assert zc["lower_bound"] is True and zc["how"] == REMOTE_BOUND
    once = dict(once, recommended="zerocopy", hints=[HINTS["zerocopy"]])  # zero-copy advice (advise APP gives it)
    once["run_as"] = "umscope place --managed advise=preferred:cpu+accessed_by:gpu -- PROGRAM ARGS"
    # The gain is against the traced run's own GPU stream, measured: 1024 migrations of 13 us, not the replay's
    for a, n in ((again, 5),):
        assert a["gain_base"]["ms"] == pytest.approx(n * 1024 * 0.013, rel=1e-3)
        assert a["gain_base"]["source"].startswith("measured")
        assert a["evidence"]["managed"]["measured_ms"] == a["gain_base"]["ms"]
        assert a["predicted_gain_vs_managed"] == pytest.approx(
            a["gain_base"]["ms"] / a["evidence"][a["recommended"]]["modelled_ms"], rel=1e-3)
    # advise says how to run a traced program as advised without touching its source (place --managed)
    assert again["run_as"] == "umscope place --managed prefetch=gpu -- PROGRAM ARGS" and "run_as" not in idle
    assert any(again["run_as"] in h for h in again["hints"])
    c = tp.classify(once, [PREFETCH])  # no plain build given: a source change
    assert not c["applicable"] and c["how"].startswith(tp.SOURCE_CHANGE) and "PreferredLocation" in c["how"]
    c = tp.classify(again, [])  # no build of the program at all: only a source change would do
    assert not c["applicable"] and "cudaMemPrefetchAsync" in c["how"]
    c = tp.classify(again, [PLAIN])  # nw and gaussian: their plain build under place --managed
    assert c["applicable"] and c["binary"] == "bin/nw" and c["managed_policy"] == "prefetch=gpu"
    c = tp.classify(once, [PLAIN])  # zero-copy as managed memory's advice: kept on the CPU, mapped for the GPU
    assert c["applicable"] and c["managed_policy"] == "advise=preferred:cpu+accessed_by:gpu"
    c = tp.classify(again, [PREFETCH])  # pathfinder has: its -DPREF build puts the advice into practice
    assert c == {"applicable": True, "how": "DEF=-DPREF", "binary": "bin/pathfinder-prefetch"}
    c = tp.classify(idle, [PREFETCH])
    assert c["applicable"] and c["binary"] is None and "already" in c["how"]
    s = tp.slim_advice(again)
    assert s["gain_base"]["ms"] > s["modelled_ms"]["managed-prefetch"] > 0
    assert s["predicted_gain_vs_managed"] == pytest.approx(s["gain_base"]["ms"] / s["modelled_ms"]["managed-prefetch"],
                                                           rel=1e-3)


def test_pages_the_driver_prefetched_are_read_by_zerocopy_too(tmp_path, capsys):
    """nw's trace (H100, session 11): the GPU faulted on 97 MB and the driver's density prefetcher brought the rest
    of the 2.5 GiB (CUPTI cause 3), whose accesses no record holds. zerocopy was priced on the faulted pages alone
    (1.9 ms) while managed memory, prefetch and explicit copies moved all of it: 86x "gain". Every mode now reads
    the prefetched pages once: zerocopy over the link, the others from GPU memory."""
    from umscope.model import trace as umtrace
    from umscope.model.dos import machine_figures
    recs, t = [{"k": "mem", "op": 1, "a": BASE, "b": 64 * MIB}], 10
    for blk in range(0, 64 * MIB, 2 * MIB):  # each 2 MiB block: one 64 KiB fault, the rest prefetched
        recs += [{"k": "um", "c": 4, "v": 1, "s": t, "e": t + 1, "a": BASE + blk, "f": 1},
                 {"k": "um", "c": 1, "v": 65536, "s": t + 1, "e": t + 2, "a": BASE + blk, "f": 2},
                 {"k": "um", "c": 1, "v": 2 * MIB - 65536, "s": t + 2, "e": t + 3, "a": BASE + blk + 65536, "f": 3}]
        t += 4
    recs.append({"k": "kernel", "s": 10, "e": t + 1})
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    unseen = 64 * MIB - 32 * 65536
    assert umtrace.from_umtrace(recs)["prefetched_unseen_bytes"] == unseen
    a = advise(path, capsys)
    zc = a["evidence"]["zerocopy"]
    assert zc["remote_bytes"] == 64 * MIB  # the 2 MiB faulted in on demand and the 62 MiB prefetched, read once each
    fig, _ = machine_figures(a["machine"])
    assert zc["modelled_ms"] >= 64 * MIB / (fig["remote_gbps"] * 1e6) * 0.999
    assert a["explicit"]["compute_ms"] >= 64 * MIB / (fig["hbm_gbps"] * 1e6) * 0.999
    assert any("density prefetcher moved to the GPU" in h and "62 MiB" in h for h in a["hints"])
    plain = advise(write_trace(tmp_path / "a.jsonl"), capsys)  # nothing prefetched: nothing added
    assert plain["evidence"]["zerocopy"]["remote_bytes"] == 64 * MIB and not any("prefetcher" in h for h in plain["hints"])


def fake_suite(tmp_path, trace, fail=(), segv_placed=False, racy=()):
    """A .thirdparty with stand-in programs: each prints its result line and, under the tracer's variables,
    writes `trace` where libumtrace would; those in `fail` exit 1; with segv_placed every program dies of SIGSEGV
    under place --managed's variable (as libumtrace did on its first GPU run); those in `racy` print a different
    result each run."""
    d = tmp_path / "tp"
    (d / "bin").mkdir(parents=True)
    built = []
    for name, prog, _, _, mode, how in tp.BUILDS:
        exe = d / "bin" / name
        out = "other" if name == "pathfinder-explicit" else "result $$" if name in racy else "result 42"
        segv = "[ -n \"$UMSCOPE_UMTRACE_MANAGED\" ] && kill -SEGV $$\n" if segv_placed else ""
        exe.write_text(f"#!/bin/sh\n{segv}echo {out}\necho \"records=$UMSCOPE_UMTRACE_RECORDS/$UMSCOPE_UMTRACE_KINDS\" >&2\n[ -n \"$UMSCOPE_TRACE_FILE\" ] && cat {trace} > \"$UMSCOPE_TRACE_FILE\"\n"
                       # under place --managed's variable, the lines libumtrace writes when it applies the policy
                       "[ -n \"$UMSCOPE_UMTRACE_MANAGED\" ] && printf '%s\\n%s\\n' "
                       "\"{\\\"k\\\":\\\"managed_policy\\\",\\\"policy\\\":\\\"$UMSCOPE_UMTRACE_MANAGED\\\",\\\"ok\\\":true}\" "
                       "'{\"k\":\"managed_apply\",\"what\":\"prefetch gpu\",\"bytes\":4096,\"ok\":true}' "
                       ">> \"$UMSCOPE_TRACE_FILE\"\n"
                       f"exit {1 if name in fail else 0}\n")
        exe.chmod(0o755)
        built.append({"binary": f"bin/{name}", "program": prog, "mode": mode, "how": how})
    (d / "manifest.json").write_text(json.dumps({"repository": tp.REPO, "commit": "0" * 40, "nvcc": "release 13.0",
                                                 "built": built}))
    (tmp_path / "libumtrace.so").write_text("")
    return d


def test_run_traces_advises_and_applies_what_needs_no_source_change(tmp_path, monkeypatch, capsys):
    d = fake_suite(tmp_path, write_trace(tmp_path / "t.jsonl", kernels=5), fail=("gaussian",))
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    out = tmp_path / "out"
    assert tp.main(["run", "--dir", str(d), "--out", str(out), "--size", "nw=32,gaussian=32,pathfinder=20",
                    "--target", "0.1", "--budget", "60"]) == 0
    res = json.loads((out / "thirdparty.json").read_text())
    nw, gs, pf = (res["programs"][n] for n in ("nw", "gaussian", "pathfinder"))
    assert nw["args"] == ["32", "10"] and nw["plain_stats"]["n"] == 3 and nw["traced"]["rc"] == 0
    assert nw["advice"]["recommended"] == "managed-prefetch" and nw["decision"]["managed_policy"] == "prefetch=gpu"
    # nw has no prefetching build: its plain build runs with place --managed's environment, which applied it
    assert nw["decision"]["binary"] == "bin/nw" and nw["advised"]["stats"]["n"] == 3
    assert [a["records"] for a in nw["advised"]["applied"]] == [[{"what": "prefetch gpu", "value": 1, "bytes": 4096,
                                                                  "refused": 0}]] * 3
    assert nw["explicit"]["stats"]["n"] == 3  # the suite's explicit version is measured
    # every timed run is traced for its GPU stream, the advised ones too (their trace is place --managed's): the
    # stand-ins all write one trace, whose 5 kernels of 1024 migrations of 13 us each, 5 ns apart, run from 10 ns
    span_ms = (5 * 1024 * 13000 + 4 * 5 + 1) / 1e6
    for c in (nw["plain"], nw["advised"]["runs"], nw["explicit"]["runs"]):
        assert [x["stderr"].strip() for x in c] == ["records=kernels,copies,um/htod"] * 3
        assert [x["gpu_stream_ms"] for x in c] == [pytest.approx(span_ms)] * 3
    # every mode advise priced is measured where a build or place --managed runs it, not the advised one alone
    assert set(nw["modes"]) == {"managed-prefetch", "zerocopy", "explicit"} == set(pf["modes"])
    assert "place --managed advise=preferred:cpu+accessed_by:gpu" in nw["modes"]["zerocopy"]["how"]
    assert pf["modes"]["zerocopy"]["how"].startswith("umscope place --managed")  # its plain build, placed
    assert nw["advised"] is not None and nw["advised"]["stats"] == nw["modes"]["managed-prefetch"]["stats"]
    # all the stand-ins' streams are equal: the first measured (plain managed) is fastest, the advice within its band
    assert nw["fastest"]["mode"] == "managed" and nw["fastest"]["advised_hit"] is True
    assert nw["fastest"]["advised_lost"] == 0 and nw["fastest"]["explicit_right"] is True  # equal bands: the same
    assert "explicit" not in [nw["fastest"]["mode"]] and "explicit" in nw["fastest"]["measured_ms"]
    assert nw["advised"]["measured_stream_gain"] == 1.0 and nw["advised"]["measured_stream_saving_ms"] == 0
    assert gs["error"].startswith("plain runs failed") and "advice" not in gs
    assert pf["decision"]["binary"] == "bin/pathfinder-prefetch" and pf["advised"]["same_output_as_plain"] is True
    assert pf["explicit"]["same_output_as_plain"] is False  # a different result is reported, not hidden
    assert pf["advised"]["predicted_gain"] == pytest.approx(pf["advice"]["predicted_gain_vs_managed"], rel=1e-3)
    assert sorted(p.name for p in out.iterdir()) == ["nw.trace.jsonl.gz", "pathfinder.trace.jsonl.gz",
                                                      "thirdparty.json", "thirdparty.md"]
    md = (out / "thirdparty.md").read_text()
    assert capsys.readouterr().out.endswith(md + "\n")  # the table is printed last
    row = next(x for x in md.splitlines() if x.startswith("| pathfinder | 100000 20 20"))
    assert "| managed-prefetch |" in row and "yes: its Makefile's prefetch option" in row and "output same as plain" in row
    row = next(x for x in md.splitlines() if x.startswith("| nw | 32 10"))
    assert "yes: umscope place --managed prefetch=gpu" in row and "predicted" in row
    assert "| gaussian | -s 32 -q" in md and "plain runs failed" in md
    assert f"| nw | zerocopy | {nw['advice']['modelled_ms']['zerocopy']:.4g} | {span_ms:.4g} [" in md
    assert "| nw | advice managed-prefetch | | | | HIT: +0.0% against managed; explicit verdict right |" in md
    assert "DIFFERS from plain" in md and "Left out: nothing" in md
    assert f"GPU stream measured 1.000x (0 ms: {span_ms:.4g} [{span_ms:.4g}-{span_ms:.4g}] against plain's {span_ms:.4g}" in row


def test_an_advised_run_that_died_and_a_plain_build_at_odds_with_itself_are_said(tmp_path, monkeypatch, capsys):
    """Session 16's first GPU run: the advised nw runs died of SIGSEGV under place --managed and the table said
    'measured - (-)'; pathfinder's plain build gave 3 outputs in 3 runs and the table said the others DIFFER."""
    d = fake_suite(tmp_path, write_trace(tmp_path / "t.jsonl", kernels=5), segv_placed=True, racy=("pathfinder",))
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    out = tmp_path / "out"
    assert tp.main(["run", "--dir", str(d), "--out", str(out), "--size", "nw=32,gaussian=32,pathfinder=20",
                    "--target", "0.1", "--budget", "60"]) == 0
    res = json.loads((out / "thirdparty.json").read_text())
    nw, pf = res["programs"]["nw"], res["programs"]["pathfinder"]
    assert nw["advised"]["failed_rc"] == [-11] * 3 and nw["advised"]["stats"] is None
    assert len({x["sha256"] for x in pf["plain"]}) == 3 and pf["advised"]["plain_outputs"] == 3
    assert "same_output_as_plain" not in pf["advised"] and "same_output_as_plain" not in pf["explicit"]
    md = (out / "thirdparty.md").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| nw | 32 10"))
    assert "FAILED in 3 of 3 runs (rc -11 = SIGSEGV, -11 = SIGSEGV, -11 = SIGSEGV)" in row
    row = next(x for x in md.splitlines() if x.startswith("| pathfinder | 100000 20 20"))
    assert "output not compared: the plain build's own runs gave 3 different outputs" in row and "DIFFERS" not in row


def test_budget_leaves_work_out_and_says_so(tmp_path, monkeypatch):
    d = fake_suite(tmp_path, write_trace(tmp_path / "t.jsonl"))
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    out = tmp_path / "out"
    assert tp.main(["run", "--dir", str(d), "--out", str(out), "--size", "nw=32", "--only", "nw,gaussian",
                    "--target", "10", "--budget", "60.2"]) == 0
    res = json.loads((out / "thirdparty.json").read_text())
    assert res["left"] == ["gaussian: not run (budget)"] and "advice" in res["programs"]["nw"]
    assert "Left out: gaussian: not run (budget)" in (out / "thirdparty.md").read_text()


@pytest.mark.parametrize("argv", [["run", "--dir", "/nonexistent"], ["run", "--dir", "D", "--budget", "0"],
                                  ["run", "--dir", "D", "--size", "nw=33"], ["run", "--dir", "D", "--size", "bfs=16"],
                                  ["run", "--dir", "D", "--only", "bfs"], ["run", "--dir", "D", "--bogus"],
                                  ["run", "--dir", "D", "--skip-modes", "managed"], ["readvise", "/nonexistent"],
                                  ["readvise"],
                                  ["build", "--src", "/nonexistent"], ["build"], ["nosuch"]])
def test_bad_input_exits_2_with_one_line(argv, tmp_path, capsys):
    d = fake_suite(tmp_path, tmp_path / "none")
    argv = [str(d) if a == "D" else a for a in argv] + (["--out", str(tmp_path / "o")] if argv[0] == "run" else [])
    with pytest.raises(SystemExit) as e:
        tp.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("thirdparty.py: ") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_build_refuses_a_repository_without_the_programs(tmp_path, capsys):
    import subprocess
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "x").write_text("x")
    subprocess.run(["git", "-C", str(tmp_path), "add", "x"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    with pytest.raises(SystemExit) as e:
        tp.main(["build", "--src", str(tmp_path), "--out", str(tmp_path / "o")])
    assert e.value.code == 2 and "is not in its commit" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_profile_keeps_the_trace_where_asked(tmp_path, monkeypatch, capsys):
    """`umscope profile --keep-trace FILE` (implies --um-trace) moves the program's trace to FILE, which advise
    reads; a directory as FILE is refused before the program runs."""
    trace = write_trace(tmp_path / "t.jsonl")
    (tmp_path / "libumtrace.so").write_text("")
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    prog = [sys.executable, "-c", f"import os, shutil; shutil.copy({str(trace)!r}, os.environ['UMSCOPE_TRACE_FILE'])"]
    kept = tmp_path / "kept.jsonl"
    assert cli.main(["profile", "--keep-trace", str(kept), "--store", str(tmp_path / "s.sqlite"), "--", *prog]) == 0
    assert kept.read_text() == trace.read_text()
    assert advise(kept, capsys)["recommended"] == "managed-prefetch"
    mark = tmp_path / "ran"
    assert cli.main(["profile", "--keep-trace", str(tmp_path), "--store", str(tmp_path / "s.sqlite"), "--",
                     "touch", str(mark)]) == 2
    assert "--keep-trace" in (err := capsys.readouterr().err) and "is a directory" in err and not mark.exists()


def test_a_program_stopped_at_its_timeout_leaves_no_process_behind(tmp_path):
    """`umscope profile` runs the program as its child: stopping profile alone at the timeout left the program
    running (nothing started on the GPU machine may outlive its parent)."""
    import os
    import time
    pid_file = tmp_path / "pid"
    r = tp.run_prog(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout=1)
    assert r["rc"] == "timeout" and r["wall_s"] < 15
    pid = int(pid_file.read_text())
    for _ in range(50):  # the kill is delivered at once; the zombie is reaped by init
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the program's child {pid} outlived the timeout")


def test_a_saving_inside_the_plain_runs_scatter_is_said_to_be_unresolved():
    """nw on an H200 (session 16): predicted 114 ms, measured -151 ms, plain runs 2.97-3.83 s: neither figure can be
    told from the runs' own scatter, and the row says so; a saving beyond the range is left unqualified."""
    c = {"runs": [{}] * 3, "predicted_gain": 3.27, "predicted_saving_ms": 113.9, "measured_gain": 0.956,
         "measured_saving_ms": -150.6, "plain_range_ms": 854.1}
    assert "predicted and measured saving within the plain runs' own range (854.1 ms)" in tp._vs(c)
    c.update(measured_saving_ms=900.0)
    assert "; predicted saving within the plain runs' own range" in tp._vs(c)
    c.update(predicted_saving_ms=1000.0)
    assert "own range" not in tp._vs(c)


def test_the_gpu_stream_runs_from_the_first_gpu_work_to_the_last_kernel_or_copy(tmp_path):
    """A migration to the GPU may start the stream (a prefetch before the first kernel); a CPU fault, a migration
    back to the host after the kernels (the CPU reading results) and an allocation do not; the program's other
    processes (FILE.PID) count."""
    recs = [{"k": "mem", "op": 1, "a": BASE, "b": MIB, "s": 5},
            {"k": "um", "c": 3, "v": 1, "s": 50, "e": 60},               # CPU fault while initialising
            {"k": "um", "c": 1, "v": MIB, "s": 1000, "e": 3000},         # the prefetch
            {"k": "kernel", "s": 3000, "e": 8000},
            {"k": "um", "c": 2, "v": MIB, "s": 9000, "e": 12000}]        # the CPU reads the results back
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert tp.gpu_stream_ms(str(path)) == pytest.approx(7000 / 1e6)
    (tmp_path / "t.jsonl.4242").write_text(json.dumps({"k": "memcpy", "ck": 2, "b": 4, "s": 8500, "e": 9500}) + "\n")
    assert tp.gpu_stream_ms(str(path)) == pytest.approx(8500 / 1e6)
    path.write_text(json.dumps({"k": "um", "c": 1, "v": MIB, "s": 1, "e": 2}) + "\n")
    (tmp_path / "t.jsonl.4242").unlink()
    assert tp.gpu_stream_ms(str(path)) is None and tp.gpu_stream_ms(str(tmp_path / "none.jsonl")) is None


def test_a_traced_run_whose_kernels_did_not_complete_is_said_above_the_advice(tmp_path, capsys):
    """UVMBench's srad at 13248 x 13248 (an H200, session 16): its first kernel reads 52 KiB before its first
    managed array, CUPTI gives its 4 kernels no times, the program exits 0, and advise had priced a 37x gain on it.
    A fault inside an allocation and timed kernels raise nothing (nw's and pathfinder's traces of that run)."""
    recs = [{"k": "mem", "op": 1, "a": BASE, "b": 64 * MIB},
            {"k": "um", "c": 4, "v": 1, "s": 5, "e": 6, "a": BASE - 53248, "f": 1},
            {"k": "um", "c": 4, "v": 1, "s": 7, "e": 8, "a": BASE + 4096, "f": 1},
            {"k": "um", "c": 1, "v": 65536, "s": 8, "e": 9, "a": BASE, "f": 2},
            {"k": "kernel", "s": 0, "e": 0}, {"k": "kernel", "s": 0, "e": 0}]
    path = tmp_path / "srad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    a = advise(path, capsys)
    assert a["gpu_work"].startswith("2 of 2 kernels have no start or end time")
    assert f"0x{BASE - 53248:x}, 52 KiB before the allocation at 0x{BASE:x}" in a["gpu_work"]
    assert a["hints"][0] == "GPU WORK NOT AS LAUNCHED: " + a["gpu_work"]
    assert cli.main(["advise", "--trace", str(path)]) == 0
    assert "  - GPU WORK NOT AS LAUNCHED: 2 of 2 kernels" in capsys.readouterr().out
    ok = advise(write_trace(tmp_path / "ok.jsonl", kernels=2), capsys)
    assert "gpu_work" not in ok and not any("NOT AS LAUNCHED" in h for h in ok["hints"])
    res = {"manifest": {"repository": tp.REPO, "commit": "0" * 40, "nvcc": "13.0"}, "umscope_commit": "x", "left": [],
           "wall_s": 1, "programs": {"srad": {"advice": tp.slim_advice(a), "decision": {}}}}
    assert f"| {a['recommended']}, ON A TRACE WHOSE GPU WORK DID NOT RUN AS LAUNCHED (2 of 2 kernels" in tp.render(res)


def test_gpu_stream_is_the_span_of_the_gpu_work_and_its_idle_part():
    from umscope.model.trace import gpu_stream
    recs = [{"k": "um", "c": 1, "v": 4096, "s": 100, "e": 200, "a": BASE},  # a migration before the first kernel
            {"k": "um", "c": 4, "v": 1, "s": 160, "e": 170, "a": BASE},  # a fault in the first kernel: not resident
            {"k": "kernel", "s": 150, "e": 400}, {"k": "kernel", "s": 500, "e": 600},
            {"k": "memcpy", "s": 550, "e": 700}, {"k": "kernel", "s": 0, "e": 0},  # an untimed kernel: not in it
            {"k": "um", "c": 2, "v": 4096, "s": 800, "e": 900, "a": BASE}]  # the CPU's read-back: not in it
    assert gpu_stream(recs) == {"span_ns": 600, "idle_ns": 100, "kernels": 2, "resident_kernels": 1,
                                "resident_kernel_ns": 100, "faulting_kernel_ns": 250}
    assert gpu_stream([r for r in recs if r["k"] == "um"]) is None


def test_the_drivers_count_of_migrated_bytes_prices_what_the_records_lost(tmp_path, capsys):
    """UVMBench's pathfinder on an H200 (session 17): CUPTI's records held 255 MiB of the 382 MiB the driver
    migrated, and advise priced prefetch on 176 MiB (3.9 ms) where the prefetching build measured 9.9 ms."""
    from umscope.model.dos import machine_figures
    path = write_trace(tmp_path / "t.jsonl")
    with open(path, "a") as f:
        f.write(json.dumps({"k": "uvm_counters", "dev": -1, "htod": 4 * 64 * MIB}) + "\n")
    a = advise(path, capsys)
    fig, _ = machine_figures(a["machine"])
    b = advise(write_trace(tmp_path / "u.jsonl"), capsys)  # the same trace without the driver's count
    pre, pre0 = a["evidence"]["managed-prefetch"]["modelled_ms"], b["evidence"]["managed-prefetch"]["modelled_ms"]
    assert pre - pre0 == pytest.approx(3 * 64 * MIB / (fig["migrate_gbps"] * 1e6), rel=1e-3)
    assert a["explicit"]["copy_in_bytes"] == 4 * 64 * MIB and b["explicit"]["copy_in_bytes"] == 64 * MIB
    zc, zc0 = a["evidence"]["zerocopy"]["modelled_ms"], b["evidence"]["zerocopy"]["modelled_ms"]
    assert zc - zc0 == pytest.approx(3 * 64 * MIB / (fig["remote_gbps"] * 1e6), rel=1e-3)
    assert a["evidence"]["zerocopy"]["remote_bytes"] == 4 * 64 * MIB  # what it priced, the driver's count
    assert b["evidence"]["zerocopy"]["remote_bytes"] == 64 * MIB
    assert any("the UVM driver's own count" in h and "256 MiB" in h for h in a["hints"])
    assert not any("the UVM driver's own count" in h for h in b["hints"])


def test_resident_kernels_time_is_their_own_work_less_what_lost_records_hide():
    """gaussian on an H200 (session 17): 9245 of its 9246 kernels ran on resident data, 3.73 s of the 3.90 s stream,
    which prefetch and explicit copies keep (they measured 3.88 s, advise had priced 0.14 s); with 62% of the
    migrated bytes in CUPTI's records, a kernel whose records were all lost would look resident too."""
    from umscope.model.driver import resident_time_ns
    s = {"resident_kernel_ns": 3_000_000, "faulting_kernel_ns": 1_000_000}
    assert resident_time_ns(s, 100 * MIB, 100 * MIB) == 3_000_000  # complete: all of it
    assert resident_time_ns(s, None, 100 * MIB) == 3_000_000  # no driver count: nothing to take out
    # 100 MiB recorded in 1 ms of faulting kernels; 50 MiB lost take 0.5 ms at that rate
    assert resident_time_ns(s, 150 * MIB, 100 * MIB) == pytest.approx(2_500_000)
    assert resident_time_ns(s, 1000 * MIB, 100 * MIB) == 0.0  # more lost than the resident kernels' time
    assert resident_time_ns(dict(s, faulting_kernel_ns=0), 150 * MIB, 0) == 0.0  # no rate to judge by: none


def test_advise_adds_the_resident_kernels_and_the_idle_time_of_a_trace(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl")
    base = advise(path, capsys)
    with open(path, "a") as f:  # three kernels of 10 ms on resident data, 1 ms apart, after the faulting one
        t = 10 ** 9
        for i in range(3):
            f.write(json.dumps({"k": "kernel", "s": t + i * 11_000_000, "e": t + i * 11_000_000 + 10_000_000}) + "\n")
    a = advise(path, capsys)
    added = a["evidence"]["managed-prefetch"]["modelled_ms"] - base["evidence"]["managed-prefetch"]["modelled_ms"]
    idle = a["evidence"]["managed-prefetch"]["idle_ms"] - base["evidence"]["managed-prefetch"]["idle_ms"]
    assert a["evidence"]["managed-prefetch"]["resident_kernels_ms"] == pytest.approx(30.0)
    assert added == pytest.approx(30.0 + idle, abs=2e-3) and idle > 900  # the gap to the first resident kernel
    assert a["explicit"]["modelled_ms"] - base["explicit"]["modelled_ms"] == pytest.approx(added, abs=2e-3)
    assert a["gain_base"]["ms"] == pytest.approx(base["gain_base"]["ms"] + idle + 30.0, abs=2e-3)


def test_readvise_on_the_h200_runs_of_session_17(capsys):
    """The kept traces and measured runs of UVMBench's nw, gaussian and pathfinder (data/thirdparty/h200-s17): advise
    names the mode measured fastest for each, and its prefetch time lies within 25% of the GPU stream measured
    (gaussian, whose stream is its resident kernels' own work, within 5%)."""
    assert tp.main(["readvise", str(ROOT / "data" / "thirdparty" / "h200-s17")]) == 0
    md = capsys.readouterr().out
    assert "measured at umscope c016bb5, predicted again at" in md
    # the first table's advised row is the re-advised one (the JSON's copy of it held the measured call's 27.22x)
    row = next(x for x in md.splitlines() if x.startswith("| gaussian | -s 4624 -q"))
    assert "| 1.01x |" in row and "predicted 1.01x (" in row
    rows = {tuple(c.strip() for c in x.split("|")[1:3]): [c.strip() for c in x.split("|")[3:-1]]
            for x in md.splitlines() if x.startswith("| ") and x.count("|") == 7}
    for prog, tol in (("nw", 0.25), ("gaussian", 0.05), ("pathfinder", 0.25)):
        assert rows[(prog, "advice managed-prefetch")][3].startswith("HIT"), prog
        pred, meas = rows[(prog, "managed-prefetch")][:2]
        assert abs(float(pred) / float(meas.split(" [")[0]) - 1) <= tol, (prog, pred, meas)


def test_readvise_writes_advise_traces_own_check_which_advise_prints(tmp_path, monkeypatch, capsys):
    from umscope.model import calibrated, driver
    out = tmp_path / "validated.json"
    out.write_text(json.dumps({"advise": {"kept": True}}))
    assert tp.main(["readvise", str(ROOT / "data" / "thirdparty" / "h200-s17"), "--write-validated",
                    "--validated-out", str(out)]) == 0
    v = json.loads(out.read_text())
    assert v["advise"] == {"kept": True}  # the other entries stay
    e = v["advise_trace"]
    assert (e["programs"], e["hits"], e["machine"], e["measured_at"]) == (3, 3, "NVIDIA H200", "c016bb5")
    assert e["explicit_cases"] == 2 and e["explicit_right"] == 1  # nw's verdict wrong, pathfinder's explicit not run
    assert abs(e["per_program"]["gaussian"]["time_error"]) < 0.05
    monkeypatch.setattr(calibrated, "VALIDATED", out)
    t = driver.trace_validated_text()
    assert "3 unmodified programs (gaussian, nw, pathfinder" in t and "fastest or within its band in 3 of 3" in t
    assert "explicit copies' verdict right in 1 of 2" in t
    monkeypatch.setattr(calibrated, "VALIDATED", tmp_path / "none.json")
    assert driver.trace_validated_text() == ""
    capsys.readouterr()


def test_a_trace_without_kernel_times_keeps_the_modelled_base(tmp_path, capsys):
    """A trace whose kernels have no times (or none at all) measures no GPU stream: advise prices plain managed
    memory with the replay, as before, and says the gain is against a modelled time."""
    path = write_trace(tmp_path / "t.jsonl", kernels=5)
    lines = [x for x in path.read_text().splitlines() if '"kernel"' not in x]
    path.write_text("\n".join(lines) + "\n")
    a = advise(path, capsys)
    assert a["gain_base"]["source"] == "modelled" and "measured_ms" not in a["evidence"]["managed"]
    assert a["gain_base"]["ms"] == a["evidence"]["managed"]["modelled_ms"]
    assert a["evidence"]["zerocopy"]["lower_bound"] is True and a["recommended"] != "zerocopy"  # a trace still


def test_skip_modes_leaves_modes_unmeasured_unless_advised(tmp_path, monkeypatch):
    d = fake_suite(tmp_path, write_trace(tmp_path / "t.jsonl", kernels=5))
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    out = tmp_path / "out"
    assert tp.main(["run", "--dir", str(d), "--out", str(out), "--size", "nw=32", "--only", "nw", "--target", "0.1",
                    "--budget", "60", "--skip-modes", "zerocopy,explicit,managed-prefetch"]) == 0
    nw = json.loads((out / "thirdparty.json").read_text())["programs"]["nw"]
    assert nw["advice"]["recommended"] == "managed-prefetch" and list(nw["modes"]) == ["managed-prefetch"]
    assert "explicit" not in nw and nw["fastest"]["measured_ms"].keys() == {"managed", "managed-prefetch"}
