"""The report's status banner: complete, interrupted (by what, during which case) or failed, every planned case
that did not run, and for profile/place runs the program's exit status and stderr."""
from umscope.report.html import render
from umscope.store import Store
from umscope.suite import Case, plan_to_json

FP = {"host": {"hostname": "nodeA"}, "cuda": {}, "gpus": [{"device": 0, "name": "NVIDIA H100 80GB HBM3",
                                                     "compute_capability": "9.0", "sms": 132, "total_mem": 80 << 30,
                                                     "l2_bytes": 50 << 20, "pci_bus_id": "0000:19:00.0",
                                                     "addressing": "hmm"}]}


def _rec(kind):
    return {"benchmark": "mpi", "op": "bw", "processor": "host", "kind": kind, "bytes": 1 << 20, "metric": "bw",
            "unit": "GB/s", "n": 3, "median": 10.0, "min": 9.9, "max": 10.1, "spread": 0.02}


def _page(s, run):
    return render(s.run(run), s.cases(run), s.records(run), s.runs())


def _first_screen(html):
    """The page up to the contents: what a reader sees before scrolling."""
    return html.split("<nav class=toc>")[0]


def test_interrupted_run_names_the_signal_the_case_and_every_case_not_run(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    plan = [Case("mpi", "system"), Case("mpi", "pinned")]
    run = s.create_run("bench mpi", "umscope bench mpi --kind system --kind pinned", plan_to_json(plan), {}, FP)
    s.add_case_result(run, plan[0], "ok", "", 0, 1, [_rec("system")])
    s.finish_run(run, "interrupted")
    s.note_interruption(run, "SIGTERM", plan[1].case_id)
    html = _page(s, run)
    top = _first_screen(html)
    assert "INTERRUPTED" in top and "by SIGTERM" in top and f"during case {plan[1].case_id}" in top
    assert plan[1].case_id in top and "running when the run was interrupted" in top
    assert "every case ran" not in html and "every one of the" not in html
    skipped = html.split("<h2 id=skipped>")[1]
    assert plan[1].case_id in skipped and "not run" in skipped
    assert "<title>umscope bench mpi (interrupted) · nodeA · NVIDIA H100 80GB HBM3 · run 1</title>" in html


def test_selftest_ended_before_any_case_says_so(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    plan = [Case("selftest", None, {"mode": m}) for m in ("ok", "crash")]
    run = s.create_run("bench selftest", "umscope bench selftest", plan_to_json(plan), {}, FP)
    s.finish_run(run, "interrupted")
    s.note_interruption(run, "SIGTERM", None)
    html = _page(s, run)
    assert "Cases: ." not in html and "no case finished" in _first_screen(html)
    assert "0 of 2 planned cases stored, 2 did not run" in _first_screen(html)
    assert "No case of this run left a measured record" in html and "older store" not in html


def test_complete_run_says_every_planned_case_ran(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    plan = [Case("mpi", "system")]
    run = s.create_run("bench mpi", "umscope bench mpi", plan_to_json(plan), {}, FP)
    s.add_case_result(run, plan[0], "ok", "", 0, 1, [_rec("system")])
    s.finish_run(run, "complete")
    html = _page(s, run)
    assert "COMPLETE" in _first_screen(html) and "every one of the 1 planned case ran" in _first_screen(html)


def test_failed_place_run_shows_exit_status_and_stderr(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("place", "umscope place --kind managed -- python x.py", [], {"kind": "managed"}, FP)
    rec = {"benchmark": "place", "op": "run", "processor": "host", "kind": "managed", "metric": "wall_time",
           "unit": "s", "n": 1, "median": 2.0, "min": 2.0, "max": 2.0, "command": "python x.py", "exit_status": 1,
           "stderr_tail": "Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n"}
    s.add_case_result(run, Case("place", "managed", {"command": "python x.py"}), "failed",
                      "the program exited with status 1", 0, 2, [rec])
    s.finish_run(run, "complete")
    html = _page(s, run)
    top = _first_screen(html)
    assert "FAILED" in top and "exited with status 1" in top and "RuntimeError: CUDA out of memory" in top
    assert "status complete" not in top.lower().replace("stored status", "")
    assert "This run kind records no conditions" in html and "older store" not in html


def test_a_place_runs_notes_are_on_the_first_screen(tmp_path):
    """A program that exits 0 while place applied nothing (`--managed` never loaded) is complete, and says so."""
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("place", "umscope place --managed prefetch=gpu -- ./app", [], {"managed": "prefetch=gpu"}, FP)
    note = "--managed prefetch=gpu: libumtrace never loaded (the program made no CUDA call): nothing was applied"
    rec = {"benchmark": "place", "op": "run", "processor": "host", "kind": "managed", "metric": "wall_time",
           "unit": "s", "n": 1, "median": 0.1, "min": 0.1, "max": 0.1, "command": "./app", "exit_status": 0,
           "stderr_tail": "", "notes": [note]}
    s.add_case_result(run, Case("place", "managed,prefetch=gpu", {"command": "./app"}), "ok", "", 0, 0.1, [rec])
    s.finish_run(run, "complete")
    top = _first_screen(_page(s, run))
    assert "COMPLETE" in top and "Note: --managed prefetch=gpu: libumtrace never loaded" in top
