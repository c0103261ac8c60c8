"""The report's headline: which record stands for a case, and the lines it writes from them.
The records here are synthetic test input, not measurements."""

from umscope.report import headline


def rec(bench, op, kind, size, median, unit="GB/s", policy="", **extra):
    return {"case_id": f"{bench} {kind}", "benchmark": bench, "op": op, "kind": kind, "policy": policy,
            "processor": extra.pop("processor", "gpu0"), "threads": extra.pop("threads", None), "bytes": size,
            "median": median, "unit": unit, "status": "ok", "extra": extra}


def test_representative_is_the_largest_size_of_each_curve():
    small = rec("copy", "ce-copy", "device", 64 << 10, 10.75, dst_kind="device", direction="uni")
    large = rec("copy", "ce-copy", "device", 256 << 20, 1462.0, dst_kind="device", direction="uni")
    other_dst = rec("copy", "ce-copy", "device", 64 << 10, 20.0, dst_kind="pinned", direction="uni")
    got = headline.representative([small, large, other_dst])
    assert large in got and small not in got and other_dst in got
    assert len(got) == 2


def test_representative_keeps_thread_counts_apart():
    one = rec("cpu-stream", "copy", "system", 1 << 30, 12.0, threads=1, processor="cpu")
    all_ = rec("cpu-stream", "copy", "system", 1 << 30, 180.0, threads=2, processor="cpu")
    assert headline.representative([one, all_]) == [one, all_]


def test_application_winner_uses_the_whole_run_not_the_iteration_median():
    # The example: per-iteration medians nearly equal, compute phases 364 ms against 488 ms.
    exp = rec("hotspot", "app", "device", 256 << 20, 0.726, unit="ms", app="hotspot", mode="explicit",
              total_excl_init_ms=400.0)
    man = rec("hotspot", "app", "managed", 256 << 20, 0.728, unit="ms", app="hotspot", mode="managed",
              total_excl_init_ms=520.0)
    (cls, app, recs, best, other), = headline.app_winners([man, exp])
    assert (cls, app, best, other) == ("stencil", "hotspot", "explicit", "managed")
    assert headline.app_time_ms(recs[best]) == 400.0


def test_winner_line_names_the_deciding_phases_and_equal_iterations():
    # The example: equal per-iteration times, explicit loses on its copy back and free.
    common = dict(unit="ms", app="triad", context_ms=0.01, alloc_ms=0.3, transfer_ms=9.0, compute_ms=1.9)
    exp = rec("triad", "app", "device", 256 << 20, 0.094, mode="explicit", back_ms=85.6, free_ms=44.4,
              total_excl_init_ms=141.2, **common)
    man = rec("triad", "app", "managed", 256 << 20, 0.094, mode="managed", back_ms=6.0, free_ms=3.5,
              total_excl_init_ms=20.7, **common)
    for r in (exp, man):
        r["min"], r["max"] = 0.093, 0.095
    w = headline.app_winners([exp, man])[0]
    line = headline.winner_line(*w)
    assert "<b>managed</b> wins, 20.7 ms whole run against explicit 141.2 ms (6.82×)" in line
    assert "explicit loses on copy-back 85.6 ms vs 6 and free 44.4 ms vs 3.5" in line
    assert "per-iteration times equal: 0.094 ms managed, 0.094 ms explicit" in line
    man.update(median=7.46, min=0.5, max=400.0)  # a wide range (first iteration migrates) is not equality
    assert "per-iteration times differ: 7.46 ms managed, 0.094 ms explicit" in headline.winner_line(*w)


def test_facts_quote_the_record_and_its_bound_source():
    r = rec("gpu-stream", "triad", "device", 1 << 30, 3000.0, efficiency=0.895, bound=3352.0,
            bound_source="datasheet: H100 SXM5 HBM3 3.35 TB/s")
    (what, text), = headline.facts([r])
    assert what.startswith("GPU memory, triad by SMs (1")
    assert text == "3000 GB/s = 90% of the datapath bound 3352 GB/s (datasheet: H100 SXM5 HBM3 3.35 TB/s)"
    (_, text), = headline.facts([rec("gpu-stream", "triad", "device", 1 << 30, 3000.0)])
    assert text == "3000 GB/s (no bound known: the bounds model has none for this path)"


def test_missing_records_leave_their_line_out():
    assert headline.facts([]) == []
    assert headline.section([]) == ""
    only_latency = rec("latency", "chase", "device", 1 << 30, 650.0, unit="ns")
    lines = headline.facts([only_latency])
    assert lines == [("GPU load latency, GPU memory (1 GiB chase)", "650 ns")]
    html = headline.section([only_latency])
    assert "This node in brief" in html and "650 ns" in html and "GB/s" not in html


def test_a_failed_record_is_never_quoted():
    bad = rec("gpu-stream", "triad", "device", 1 << 30, 5000.0)
    bad["status"] = "failed"
    assert headline.facts([bad]) == []


def test_default_suite_summary_prints_one_row_per_curve_and_app_whole_runs(capsys):
    from umscope import cli
    small = rec("copy", "ce-copy", "device", 64 << 10, 10.75, dst_kind="device", direction="uni")
    large = rec("copy", "ce-copy", "device", 256 << 20, 1462.0, dst_kind="device", direction="uni")
    app = rec("hotspot", "app", "managed", 256 << 20, 0.728, unit="ms", app="hotspot", mode="managed",
              total_excl_init_ms=488.0)
    for r in (small, large, app):
        r.update(spread=0.01, min=r["median"], max=r["median"])
    cli.print_summary([small, large, app], [], representative=True)
    out = capsys.readouterr().out
    assert "1462" in out and "10.75" not in out
    assert "488" in out and "0.728" not in out
    assert "one row per case" in out
    cli.print_summary([small, large, app], [])
    out = capsys.readouterr().out
    assert "10.75" in out and "1462" in out and "0.728" in out
