"""umscope place and libumalloc: the allocator's routing, size classes, guard and bookkeeping on CPU
(UMSCOPE_PLACE_TEST_BACKEND serves blocks from the C heap and stands in for the GPU's free memory), the
command's argument handling, and on a GPU the bookkeeping against what PyTorch allocated."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli
from umscope import place

LIB = place.library_path()
needs_lib = pytest.mark.skipif(LIB is None, reason="this build has no libumalloc (built without the CUDA toolkit)")


def _in_child(code, **env):
    """Runs code with the library loaded in a fresh process (its configuration is read once per process)."""
    prog = textwrap.dedent("""
        import ctypes, json, sys
        from umscope import place
        L = place.library()
        err = ctypes.create_string_buffer(2048)
        def alloc(n, stream=None):
            p = L.umscope_place_test_alloc(n, stream, err, len(err))
            return p, err.value.decode()
        def free(p):
            L.umscope_free(p, 0, 0, None)
        def route(n):
            out = ctypes.create_string_buffer(512)
            L.umscope_place_route(n, out, len(out))
            return out.value.decode()
        """) + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, **env))
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@needs_lib
def test_rules_route_by_size_first_match_wins():
    out, _ = _in_child("out = [route(n) for n in (100, 4096, 64 << 20, (64 << 20) - 1, 1 << 30)]",
                       UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_KIND="pinned",
                       UMSCOPE_PLACE_RULES=">=64M:managed,advise=preferred:cpu+accessed_by:gpu;<4K:device")
    managed = "managed,advise=preferred:cpu+accessed_by:gpu,first_touch=cpu"
    assert out == ["device", "pinned,first_touch=cpu", managed, "pinned,first_touch=cpu", managed]


@needs_lib
def test_bookkeeping_counts_bytes_peaks_and_size_classes():
    out, _ = _in_child("""
        a, _ = alloc(1000); b, _ = alloc(3 << 20); c, _ = alloc(300 << 20)
        free(b); free(a)
        d, _ = alloc(1000)       # same size class, same stream: the cached block comes back
        e, _ = alloc(1000, 7)    # another stream: a new block
        out = json.loads(ctypes.string_at(0) if False else '{}')
        buf = ctypes.create_string_buffer(1 << 16); L.umscope_place_stats_json(buf, len(buf))
        out = json.loads(buf.value.decode()); out["same"] = d == a
    """, UMSCOPE_PLACE_TEST_BACKEND="8G", UMSCOPE_PLACE_KIND="device")
    k = out["kinds"]["device"]
    assert k["requests"] == 5 and k["frees"] == 2
    assert k["requested_bytes"] == 1000 * 3 + (3 << 20) + (300 << 20)
    assert k["peak_live_bytes"] == 1000 + (3 << 20) + (300 << 20)
    assert k["live_bytes"] == 2000 + (300 << 20)
    assert k["reused"] == 1 and out["same"] and k["blocks_made"] == 4
    assert k["by_size_class"] == {"<64KiB": {"requests": 3, "bytes": 3000},
                                  "1MiB-16MiB": {"requests": 1, "bytes": 3 << 20},
                                  ">=256MiB": {"requests": 1, "bytes": 300 << 20}}
    # Size classes: powers of two from 512 B below 1 MiB, then multiples of 2 MiB.
    assert k["block_bytes"] == 1024 + 1024 + (4 << 20) + (300 << 20)
    assert out["total"]["requests"] == 5 and out["test_backend"] is True


@needs_lib
def test_size_class():
    L = place.library()
    assert [L.umscope_place_size_class(n) for n in (1, 512, 513, (1 << 20) - 1, 1 << 20, 5 << 20)] == \
        [512, 512, 1024, 1 << 20, 2 << 20, 6 << 20]


@needs_lib
def test_guard_refuses_managed_beyond_free_gpu_memory_and_counts_the_refusal():
    out, err = _in_child("""
        a, _ = alloc(600 << 20)
        b, why = alloc(600 << 20)
        small, _ = alloc(100 << 20)   # fits
        buf = ctypes.create_string_buffer(1 << 16); L.umscope_place_stats_json(buf, len(buf))
        out = {"b": b, "why": why, "small": bool(small), "stats": json.loads(buf.value.decode())}
    """, UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_KIND="managed,first_touch=none")
    assert out["b"] is None and "refusing" in out["why"] and "--allow-oversubscription" in out["why"]
    assert out["small"]
    k = out["stats"]["kinds"]["managed,first_touch=none"]
    assert k["refused"] == 1 and k["requests"] == 2 and out["stats"]["refusals"]
    assert "umscope place: refusing" in err  # one line on stderr


@needs_lib
def test_guard_releases_cached_managed_blocks_before_refusing_and_allow_lifts_it():
    out, _ = _in_child("""
        a, _ = alloc(600 << 20); free(a)
        b, why = alloc(700 << 20)    # a's cached block is given back first
        out = [bool(b), why]
    """, UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_KIND="managed")
    assert out == [True, ""]
    out, _ = _in_child("""
        a, _ = alloc(600 << 20); b, why = alloc(600 << 20); out = [bool(b), why]
    """, UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_KIND="managed", UMSCOPE_PLACE_ALLOW_OVERSUBSCRIPTION="1")
    assert out == [True, ""]


@needs_lib
def test_set_kind_switches_later_allocations_and_records_the_phases():
    out, _ = _in_child("""
        alloc(1 << 20)
        place.set_kind("device")
        alloc(1 << 20)
        out = place.stats()
    """, UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_KIND="pinned,first_touch=none")
    assert set(out["kinds"]) == {"pinned,first_touch=none", "device"}
    assert out["default_kind_phases"] == ["pinned,first_touch=none", "device"]


@needs_lib
def test_stats_written_at_exit_with_pid(tmp_path):
    pattern = str(tmp_path / "s-%p.json")
    _in_child("alloc(4096); out = 1", UMSCOPE_PLACE_TEST_BACKEND="1G", UMSCOPE_PLACE_STATS=pattern)
    files = list(tmp_path.glob("s-*.json"))
    assert len(files) == 1 and files[0].stem.split("-")[1].isdigit()
    assert json.loads(files[0].read_text())["total"]["requested_bytes"] == 4096


@needs_lib
@pytest.mark.parametrize("kind,rules,text", [
    ("bogus", "", "unknown memory kind 'bogus'"),
    ("managed,advise=sideways", "", "policy advise=sideways not understood"),
    ("device", "64M:managed", "must start with >=SIZE: or <SIZE:"),
    ("device", ">=64Q:managed", "rule '>=64Q:managed': unknown size unit"),
    ("device", ">=64M", "needs ':KIND'"),
    ("device", ">=64M:nope", "unknown memory kind 'nope'"),
])
def test_bad_configuration_is_one_clear_error(kind, rules, text):
    with pytest.raises(place.UsageError, match=text.replace("(", r"\(").replace("|", r"\|")):
        place.check_config(kind, rules)


@needs_lib
@pytest.mark.parametrize("args,text", [
    (["place", "--kind", "device"], "needs a command after --"),
    (["place", "--", "true"], "needs --kind"),
    (["place", "--kind", "bogus", "--", "true"], "unknown memory kind 'bogus'"),
    (["place", "--kind", "device", "--rule", ">=1M:device;<1M:pinned", "--", "true"], "one rule per --rule"),
    (["place", "--kind", "device", "--rule", "1M:device", "--", "true"], "must start with"),
    (["place", "--kind", "device", "--", "/nonexistent/prog"], "command not found"),
])
def test_place_bad_input_exits_2_with_one_line(args, text, store_path):
    res = run_cli(*args, "--store", store_path) if "--" not in args else \
        run_cli(*args[:args.index("--")], "--store", store_path, *args[args.index("--"):])
    assert res.returncode == 2, res.stderr
    assert text in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not os.path.exists(store_path) or "runs" not in res.stdout


@needs_lib
def test_place_passes_output_and_status_through_and_stores_a_run(store_path):
    res = run_cli("place", "--kind", "managed", "--rule", ">=64M:pinned", "--store", store_path, "--json", "--",
                  sys.executable, "-c", "import sys; print('hello from the program'); sys.stderr.write('err line\\n');"
                  " sys.exit(3)")
    assert res.returncode == 3
    assert "hello from the program" in res.stdout and "err line" in res.stderr
    recs = json.loads(res.stdout.strip().splitlines()[-1])
    run = next(r for r in recs if r["op"] == "run")
    assert run["exit_status"] == 3 and "hello from the program" in run["stdout_tail"]
    assert run["kind_spec"] == "managed" and run["rules"] == [">=64M:pinned"]
    runs = json.loads(run_cli("runs", "--json", "--store", store_path).stdout)
    assert runs[-1]["kind"] == "place"


def test_place_environment_puts_sitecustomize_first(monkeypatch):
    if LIB is None:
        pytest.skip("no libumalloc")
    env = place.environment("managed", ">=1G:pinned", True, "/tmp/x-%p.json", base={"PYTHONPATH": "/a:/b"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(place.SITE), "/a", "/b"]
    assert (place.SITE / "sitecustomize.py").exists()
    assert env["UMSCOPE_PLACE_KIND"] == "managed" and env["UMSCOPE_PLACE_RULES"] == ">=1G:pinned"
    assert env["UMSCOPE_PLACE_ALLOW_OVERSUBSCRIPTION"] == "1" and env["UMSCOPE_PLACE_LIB"] == LIB


@pytest.mark.gpu
def test_place_keeps_pytorchs_statistics_and_serves_its_segments(store_path):
    """PyTorch's allocator statistics work under place and count the placed memory: its reserved bytes (the
    segments) are what libumalloc served; the 200 MiB tensor's own segment is managed by the rule, the small
    tensors' shared segments device memory."""
    pytest.importorskip("torch")
    prog = ("import json, torch\n"
            "xs = [torch.empty(n, device='cuda', dtype=torch.float32) for n in (1000, 1 << 20, 50 << 20)]\n"
            "total = sum(x.numel() * x.element_size() for x in xs)\n"
            "ms = torch.cuda.memory_stats()\n"
            "torch.cuda.reset_peak_memory_stats(); assert torch.cuda.max_memory_allocated() >= total\n"
            "assert 'GPU reserved memory' in torch.cuda.memory_summary()\n"
            "print(json.dumps({'total': total, 'allocated': ms['allocated_bytes.all.current'],"
            " 'reserved': ms['reserved_bytes.all.current']}))\n")
    res = run_cli("place", "--kind", "device", "--rule", ">=64M:managed,prefetch=gpu", "--store", store_path,
                  "--json", "--", sys.executable, "-c", prog)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    want = json.loads(lines[0])
    recs = json.loads(lines[-1])
    assert want["total"] <= want["allocated"] <= want["reserved"]
    kinds = {r["kind"] + ("," + r["policy"] if r["policy"] else ""): r for r in recs if r["op"] == "allocations"}
    assert sum(r["counters"]["live_bytes"] for r in kinds.values()) == want["reserved"]
    assert kinds["managed,first_touch=cpu,prefetch=gpu"]["counters"]["requested_bytes"] == 200 << 20
    assert "was not placed" not in res.stderr


@pytest.mark.parametrize("kinds,gpus,refused", [
    (["system"], [{"pageable_memory_access": 0}], True),
    (["device", "numa:0,first_touch=cpu"], [{"pageable_memory_access": 0}, {"pageable_memory_access": 0}], True),
    (["system,prefetch=gpu"], [{"pageable_memory_access": 1}], False),   # HMM or ATS: reachable
    (["system"], [], False),                                             # no GPU seen: nothing to judge by
    (["managed", "pinned", "registered"], [{"pageable_memory_access": 0}], False),
    (["device", "peer:1"], [{"pageable_memory_access": 0}], "no GPU 1"),
    (["peer:1"], [{"pageable_memory_access": 0}, {"pageable_memory_access": 0}], False),
])
def test_a_kind_no_gpu_can_reach_is_refused_before_the_program_starts(kinds, gpus, refused):
    if refused:
        with pytest.raises(place.UsageError, match="no HMM or ATS" if refused is True else refused):
            place.check_reach(kinds, gpus)
    else:
        place.check_reach(kinds, gpus)
    assert place.rule_kinds([">=64M:system,first_touch=cpu", "<1M:device"]) == ["system,first_touch=cpu", "device"]


@pytest.mark.gpu
def test_place_refuses_system_memory_on_a_gpu_without_hmm(store_path):
    from umscope import native
    gpus = native.native_info().get("gpus") or []
    if not gpus or any(g.get("pageable_memory_access") for g in gpus):
        pytest.skip("needs a GPU without HMM or ATS")
    res = run_cli("place", "--kind", "device", "--rule", ">=1G:system", "--store", store_path, "--",
                  sys.executable, "-c", "print('ran')")
    assert res.returncode == 2 and "no HMM or ATS" in res.stderr and "ran" not in res.stdout
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.gpu
def test_place_runs_backward_graphs_empty_cache_and_a_programs_own_pool(store_path):
    """The things PyTorch programs do that the route must survive (issue 34): a backward pass (autograd's
    own thread), a CUDA graph captured and replayed (torch.cuda.graph empties the cache first), empty_cache,
    a MemPool of the program's dropped while the route is under way; every result checked against the
    same computation before, and every byte in use at exit placed."""
    pytest.importorskip("torch")
    prog = textwrap.dedent("""
        import torch
        w = torch.randn(512, 512, device='cuda', requires_grad=True)
        x = torch.randn(64, 512, device='cuda')
        (x @ w).relu().sum().backward()
        g0 = w.grad.clone()
        w.grad = None
        (x @ w).relu().sum().backward()
        assert torch.equal(w.grad, g0)
        static = x.clone()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = (static @ w).relu()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            y = (static @ w).relu()
        junk = [torch.full((64, 512), 7.0, device='cuda') for _ in range(8)]
        static.copy_(2 * x)
        graph.replay()
        assert torch.allclose(y, (2 * x @ w).relu().detach())
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            t = torch.ones(1 << 20, device='cuda')
        del pool, t
        before = torch.cuda.memory_reserved()
        del junk
        torch.cuda.empty_cache()
        assert torch.cuda.memory_reserved() <= before
        print('OK', torch.cuda.max_memory_allocated())
    """)
    res = run_cli("place", "--kind", "device", "--store", store_path, "--", sys.executable, "-c", prog)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout and "was not placed" not in res.stderr
