#!/usr/bin/env python3
"""Probe (GPU, about 60 s): does the installed PyTorch support umscope place's allocator route
(python/umscope/place_site/umscope_torch_route.py: PyTorch's caching allocator kept, its segments served by
libumalloc through a torch.cuda.MemPool routed device-wide)? Each case runs in its own process (a hang or
crash is reported, not inherited):

  info     torch version, the pool API's signatures and the Python sources the route relies on
  route    the route installed: which pool a tensor's segment is in when allocated from the main thread, a side
           stream, another Python thread and autograd's backward thread; PyTorch's statistics; CUDA graph
           capture and replay (result checked against eager); empty_cache; record_stream'd frees;
           a pin_memory DataLoader; libumalloc's own count
  managed  the same allocations with the kind managed (libumalloc's bookkeeping by kind)
  compile, compile-ro  torch.compile (default; reduce-overhead: CUDA-graph trees) forward+backward under the
           route, checked against eager
  cli      `umscope place --kind device -- python -c ...` end to end (sitecustomize): statistics, exit status

    pip install --no-build-isolation . && python3 bench/place_probe.py     # writes $OUT/place_probe.json
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "python" / "umscope" / "place_site"


def _lib():
    from umscope import place
    return place.need_library()


def _install(torch):
    sys.path.insert(0, str(SITE))
    import umscope_torch_route
    return umscope_torch_route.install(torch, _lib())


def _pool_of(torch, t):
    ptr = t.data_ptr()
    for seg in torch.cuda.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return tuple(seg.get("segment_pool_id") or (0, 0))
    return None


def _check(out, name, fn):
    t0 = time.perf_counter()
    try:
        out[name] = fn()
    except Exception as e:  # noqa: BLE001 - every failure is the finding
        out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]}
    out[name + "_s"] = round(time.perf_counter() - t0, 3)


def case_info():
    import inspect
    import torch
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": torch.cuda.device_count(),
           "name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    sig = {}
    for n in ("_cuda_beginAllocateToPool", "_cuda_beginAllocateCurrentThreadToPool", "_cuda_endAllocateToPool",
              "_cuda_endAllocateCurrentStreamToPool", "_cuda_releasePool", "_cuda_emptyCache",
              "_cuda_beginAllocateCurrentStreamToPool", "_cuda_getCheckpointState"):
        f = getattr(torch._C, n, None)
        sig[n] = None if f is None else (f.__doc__ or "").strip().splitlines()[:3]
    sig["_MemPool.__init__"] = (getattr(torch._C, "_MemPool", None).__init__.__doc__ or "").strip()[:600] \
        if hasattr(torch._C, "_MemPool") else None
    out["signatures"] = sig
    src = []
    for obj in ("torch.cuda.memory.use_mem_pool", "torch.cuda.memory.MemPool", "torch.cuda.memory.empty_cache",
                "torch.cuda.graphs.CUDAGraph", "torch.cuda.graphs.graph", "torch.cuda.graphs.graph_pool_handle",
                "torch.cuda.set_device", "torch.cuda.device", "torch.cuda._lazy_init"):
        mod, _, attr = obj.rpartition(".")
        try:
            o = getattr(__import__(mod, fromlist=[attr]), attr)
            src.append(f"### {obj}\n{inspect.getsource(o)}")
        except Exception as e:  # noqa: BLE001
            src.append(f"### {obj}: {e}")
    od = os.environ.get("OUT")
    if od:
        Path(od, "place_probe_sources.txt").write_text("\n".join(src)[:200000])
    return out


def case_route():
    import threading
    import torch
    r = _install(torch)
    out = {}
    x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    ours = tuple(r.pools[torch.cuda.current_device()].id)
    out["form"] = r.form
    out["main_thread_in_pool"] = _pool_of(torch, x) == ours

    def side():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = torch.ones(3 << 20, device="cuda")
        s.synchronize()
        return _pool_of(torch, y) == ours
    _check(out, "side_stream_in_pool", side)

    def thread():
        res = {}

        def run():
            z = torch.ones(5 << 20, device="cuda")
            res["p"] = _pool_of(torch, z) == ours
        t = threading.Thread(target=run)
        t.start()
        t.join()
        return res.get("p")
    _check(out, "python_thread_in_pool", thread)

    def backward():
        seen = {}

        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                h = torch.empty(6 << 20, device=g.device)
                seen["thread"] = threading.get_ident() != main
                seen["in_pool"] = _pool_of(torch, h) == ours
                return g * 2

        main = threading.get_ident()
        a = torch.randn(1024, device="cuda", requires_grad=True)
        F.apply(a).sum().backward()
        torch.cuda.synchronize()
        return seen
    _check(out, "backward", backward)

    def stats():
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        peak = torch.cuda.max_memory_allocated()
        ms = torch.cuda.memory_stats()
        del big
        return {"allocated_delta": peak - before, "want": 64 << 20, "reserved": torch.cuda.memory_reserved(),
                "memory_stats_keys": len(ms), "summary_chars": len(torch.cuda.memory_summary()),
                "mem_get_info": list(torch.cuda.mem_get_info())}
    _check(out, "stats", stats)

    def graph():
        w = torch.randn(256, 256, device="cuda")
        xin = torch.randn(64, 256, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                ((xin @ w).relu() @ w).sum(1)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            mid = (xin @ w).relu()
            yout = (mid @ w).sum(1)
        gpool = _pool_of(torch, yout)
        # eager memory churn after capture: must not reuse the graph's memory
        junk = [torch.full((64, 256), 1e6, device="cuda") for _ in range(16)]
        xin.copy_(torch.randn(64, 256, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        ref = ((xin @ w).relu() @ w).sum(1)
        del junk
        return {"graph_pool_is_ours_global": gpool == ours, "graph_pool_served_by_umalloc":
                gpool in {tuple(p.id) for p in r.graph_pools}, "replay_equal": bool(torch.allclose(yout, ref,
                                                                                                   rtol=1e-3, atol=1e-2))}
    _check(out, "graph", graph)

    def mempool_user():
        p = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(p):
            t = torch.empty(4 << 20, device="cuda")
        return {"user_pool_wins": _pool_of(torch, t) == tuple(p.id)}
    _check(out, "use_mem_pool", mempool_user)

    def record_stream(step):
        s = torch.cuda.Stream()
        w = torch.nn.Parameter(torch.zeros(4, device="cuda"))
        opt = torch.optim.SGD([w], lr=0.1)
        w.grad = torch.zeros_like(w)
        torch.cuda.synchronize()
        r0 = torch.cuda.memory_reserved()
        for _ in range(100):
            a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
            with torch.cuda.stream(s):
                a.add_(1)
            a.record_stream(s)
            del a
            if step:
                opt.step()  # the route reclaims record_stream'd blocks after each optimizer step
        torch.cuda.synchronize()
        r1 = torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
        r2 = torch.cuda.memory_reserved()
        return {"reserved_growth_MiB": (r1 - r0) / 2**20, "after_empty_cache_MiB": (r2 - r0) / 2**20}
    _check(out, "record_stream_no_optimizer", lambda: record_stream(False))
    _check(out, "record_stream_with_optimizer_steps", lambda: record_stream(True))

    def pool_dropped():
        p = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(p):
            t = torch.ones(1 << 20, device="cuda")
        s = float(t.sum())
        del p  # destroyed while our routing is under way
        del t
        torch.cuda.empty_cache()
        return {"ok": s == float(1 << 20), "pinned_then_released": len(r.pinned) == 0}
    _check(out, "pool_dropped", pool_dropped)

    def empty():
        t = [torch.empty(32 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
        r_before = torch.cuda.memory_reserved()
        del t
        torch.cuda.empty_cache()
        r_after = torch.cuda.memory_reserved()
        u = torch.ones(1 << 20, device="cuda")
        return {"reserved_before": r_before, "reserved_after": r_after,
                "new_pool_after": _pool_of(torch, u) == tuple(r.pools[0].id), "pools_now": len(r.pools)}
    _check(out, "empty_cache", empty)

    def loader():
        ds = torch.utils.data.TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
        dl = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2, pin_memory=True)
        tot = 0.0
        for xb, yb in dl:
            tot += float(xb.cuda(non_blocking=True).sum())
        return {"ok": True, "sum_equal": abs(tot - float(ds.tensors[0].sum())) < 1e-2}
    _check(out, "pin_memory_loader", loader)

    from umscope import place
    s = place.stats(_lib())
    out["umalloc"] = {k: {kk: v[kk] for kk in ("requests", "requested_bytes", "peak_live_bytes")}
                      for k, v in s.get("kinds", {}).items()}
    out["outside"] = r.outside()
    out["flush_error"] = r.flush_error
    return out


def case_managed():
    import torch
    r = _install(torch)
    a = torch.randn(16 << 20, device="cuda")
    b = (a * 2).sum()
    torch.cuda.synchronize()
    from umscope import place
    s = place.stats(_lib())
    return {"sum_ok": abs(float(b) - 2 * float(a.sum())) < 1e-2 * abs(float(b)) + 1, "form": r.form,
            "kinds": list(s.get("kinds", {})), "allocated": torch.cuda.memory_allocated()}


def case_compile(mode):
    import torch
    _install(torch)
    out = {}
    if True:
        def run(mode=mode):
            torch.manual_seed(0)
            m = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).cuda()
            x = torch.randn(32, 128, device="cuda")
            ref = m(x)
            cm = torch.compile(m, mode=mode)
            for _ in range(3):
                y = cm(x)
            y.sum().backward()
            torch.cuda.synchronize()
            return {"equal": bool(torch.allclose(y, ref, rtol=1e-3, atol=1e-3)),
                    "grad": m[0].weight.grad is not None}
        _check(out, mode, run)
    return out


def case_cli():
    import tempfile
    prog = ("import torch; x = torch.ones(1 << 22, device='cuda'); y = (x * 2).sum(); "
            "torch.cuda.empty_cache(); g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream(); "
            "s.wait_stream(torch.cuda.current_stream())\n"
            "with torch.cuda.stream(s): z = x * 3\n"
            "torch.cuda.current_stream().wait_stream(s)\n"
            "with torch.cuda.graph(g): z = x * 3\n"
            "g.replay(); torch.cuda.synchronize()\n"
            "print('OK', float(y), float(z.sum()), torch.cuda.max_memory_allocated(), torch.cuda.memory_reserved())")
    with tempfile.TemporaryDirectory() as d:
        res = subprocess.run([sys.executable, "-m", "umscope", "place", "--kind", "device", "--store",
                              os.path.join(d, "s.sqlite"), "--report", os.path.join(d, "r.html"), "--",
                              sys.executable, "-c", prog], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if not k.startswith("UMSCOPE_PLACE")})
    return {"rc": res.returncode, "stdout": res.stdout[-500:], "stderr": _ends(res.stderr)}


def _ends(text):
    """A crash's first 3000 characters (the error) and last 1500 (where)."""
    return text if len(text) <= 4500 else text[:3000] + "\n[...]\n" + text[-1500:]


CASES = {"info": case_info, "route": case_route, "managed": case_managed,
         "compile": lambda: case_compile("default"), "compile-ro": lambda: case_compile("reduce-overhead"),
         "cli": case_cli}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--case":
        print("PROBE " + json.dumps(CASES[sys.argv[2]](), default=str))
        return 0
    outdir = Path(os.environ.get("OUT") or ".")
    results = {}
    for name in CASES:
        env = dict(os.environ, UMSCOPE_PLACE_KIND="managed" if name == "managed" else "device",
                   UMSCOPE_PLACE_RULES="", UMSCOPE_PLACE_CACHE="0")
        env.pop("UMSCOPE_PLACE_LIB", None)  # each case installs the route itself
        t0 = time.time()
        try:
            res = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True,
                                 timeout=120 if name.startswith("compile") else 60, env=env)
            line = [ln for ln in res.stdout.splitlines() if ln.startswith("PROBE ")]
            results[name] = json.loads(line[-1][6:]) if line else {"rc": res.returncode,
                                                                  "stderr": _ends(res.stderr)}
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr or "")
            results[name] = {"timeout": True, "stderr": _ends(err)}
        results[name + "_wall_s"] = round(time.time() - t0, 1)
        print(f"== {name} ({results[name + '_wall_s']} s)\n{json.dumps(results[name], indent=1, default=str)}",
              flush=True)
    (outdir / "place_probe.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
