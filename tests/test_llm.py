"""The llm application: configurations, modes, the plan and the command's bad input on CPU; on a GPU, a
small model in every placement giving the logits of the device placement (same seed)."""
import json
import subprocess
import sys

import pytest

from conftest import run_cli
from umscope import apps
from umscope.apps import llm
from umscope.suite import Case


def test_parameter_counts_are_the_published_sizes():
    # GPT-2 XL 1.56 B, Llama 3.1 8B 8.03 B, Llama 3.2 1B 1.24 B (tied embeddings).
    assert llm.param_count("gpt2-xl") == 1_557_611_200
    assert llm.param_count("gpt2") == 124_439_808
    assert llm.param_count("llama-8b") == 8_030_261_248
    assert llm.param_count("llama-1b") == 1_235_814_400
    # Llama 2 7B 6.74 B, 13B 13.0 B (fusco2024's Fig. 17 models).
    assert llm.param_count("llama2-7b") == 6_738_415_616 and llm.param_count("llama2-13b") == 13_015_864_320
    assert llm.param_count("codellama-34b") == 33_743_970_304  # Code Llama 34B
    assert llm.weight_bytes("llama-8b", "fp16") == 2 * 8_030_261_248


def test_parameter_count_matches_transformers():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    transformers = pytest.importorskip("transformers")
    for name in ("gpt2-tiny", "llama-tiny", "gpt2-medium", "llama2-7b"):
        arch, c = llm.MODELS[name]
        cfg = (transformers.GPT2Config(**dict(llm.GPT2_BASE, **c)) if arch == "gpt2"
               else transformers.LlamaConfig(**dict(llm.LLAMA_BASE, **c)))
        with torch.device("meta"):
            m = transformers.AutoModelForCausalLM.from_config(cfg)
        assert sum(p.numel() for p in m.parameters()) == llm.param_count(name)


@pytest.mark.parametrize("name", ["llama-tiny", "gpt2-tiny"])
def test_static_cache_decoder_gives_transformers_greedy_tokens(name):
    # The decode step the CUDA graph captures (static KV cache, fixed buffers, argmax fed back in place),
    # run eagerly on the CPU: the same tokens as transformers' own greedy generate(), and a second
    # generation (cache reset in place) the same again.
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    transformers = pytest.importorskip("transformers")
    arch, c = llm.MODELS[name]
    cfg = (transformers.GPT2Config(**dict(llm.GPT2_BASE, **c)) if arch == "gpt2"
           else transformers.LlamaConfig(**dict(llm.LLAMA_BASE, **c)))
    torch.manual_seed(1)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 8))
    with torch.inference_mode():
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, min_new_tokens=6,
                             do_sample=False, pad_token_id=0)[:, 8:]
        dec = llm.Decoder(model, cfg, 2, 8, 6, torch)
        got = []
        for _ in range(2):
            dec.prefill(ids)
            for _ in range(5):
                dec.step()
            got.append(dec.toks.clone())
    assert torch.equal(got[0], ref) and torch.equal(got[1], ref)


def _tiny(name, torch, transformers):
    arch, c = llm.MODELS[name]
    cfg = (transformers.GPT2Config(**dict(llm.GPT2_BASE, **c)) if arch == "gpt2"
           else transformers.LlamaConfig(**dict(llm.LLAMA_BASE, **c)))
    torch.manual_seed(1)
    return transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval(), cfg


def _decode(dec, ids, steps):
    dec.prefill(ids)
    for i in range(steps):
        dec.step()
        if i == 0:
            dec.step1.copy_(dec.logits)
    return dec.toks.clone(), dec.logits_seen()


def test_compiled_step_gives_the_eager_steps_tokens_and_a_failed_compile_falls_back(monkeypatch):
    # --compile: the step torch.compile makes (inductor; here its CPU backend, ~10 s) decodes the tokens of the
    # uncompiled step with the same logits; its compile time is measured in the warm-up. A compiler that
    # fails leaves the eager step running, with the reason kept for the record.
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    transformers = pytest.importorskip("transformers")
    import shutil
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("no C++ compiler for inductor's CPU backend")
    model, cfg = _tiny("llama-tiny", torch, transformers)
    ids = torch.randint(0, cfg.vocab_size, (1, 8))
    with torch.inference_mode():
        ref_toks, ref = _decode(llm.Decoder(model, cfg, 1, 8, 6, torch), ids, 5)
        dec = llm.Decoder(model, cfg, 1, 8, 6, torch, compile_step=True)
        dec._warm(ids)
        assert dec.compiled and dec.compile_error is None and dec.compile_s > 0
        toks, seen = _decode(dec, ids, 5)
        assert torch.equal(toks, ref_toks)
        assert max(llm._rel(seen[k], ref[k]) for k in ("first", "step1", "last")) < 1e-5

        lay = llm.Decoder(model, cfg, 1, 8, 6, torch, compile_step="layers")  # each decoder layer compiled
        lay._warm(ids)
        assert lay.compiled and lay.step_fn == lay._step_layers and lay.compile_s > 0
        assert lay.compile_graphs >= dec.compile_graphs + len(llm._decoder_layers(model))  # one per layer
        toks, seen = _decode(lay, ids, 5)
        assert torch.equal(toks, ref_toks) and llm._rel(seen["last"], ref["last"]) < 1e-5
        # the layers' own forward outside the decode step (the prefill is not compiled)
        assert all("forward" not in vars(m) for m in llm._decoder_layers(model))

        def broken(fn, **kw):
            def run():
                raise RuntimeError("inductor exploded")
            return run
        monkeypatch.setattr(torch, "compile", broken)
        dec = llm.Decoder(model, cfg, 1, 8, 6, torch, compile_step=True)
        dec._warm(ids)
        assert not dec.compiled and "inductor exploded" in dec.compile_error and dec.step_fn == dec._step
        assert torch.equal(_decode(dec, ids, 5)[0], ref_toks)


def test_triton_gemv_computes_the_layers_products_interpreted():
    # apps/llm_gemv.py's kernel under Triton's interpreter (CPU, ~20 s): GPT-2's Conv1D (W [K, N], bias) and
    # Llama's nn.Linear (W [N, K]) one-row products give the layers' own tokens and logits; the prefill (more
    # than one row) stays with the layers' forward.
    pytest.importorskip("torch", reason="PyTorch is not installed here")
    pytest.importorskip("transformers")
    pytest.importorskip("triton", reason="Triton is not installed here")
    code = """
import os, sys, torch
from umscope.apps import llm, llm_gemv
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
from test_llm import _tiny, _decode
import transformers
own = llm_gemv._define(torch)
calls = []
llm_gemv._op = lambda *a: calls.append(a[3]) or own(*a)
for name, layers in (("gpt2-tiny", 9), ("llama-tiny", 15)):
    model, cfg = _tiny(name, torch, transformers)
    ids = torch.randint(0, cfg.vocab_size, (1, 8))
    with torch.inference_mode():
        t0, r0 = _decode(llm.Decoder(model, cfg, 1, 8, 6, torch), ids, 5)
        calls.clear()
        assert llm_gemv.install(model, torch) == layers
        t1, r1 = _decode(llm.Decoder(model, cfg, 1, 8, 6, torch), ids, 5)
    err = max(llm._rel(r1[k], r0[k]) for k in ("first", "step1", "last"))
    assert torch.equal(t0, t1) and err < 1e-5 and r1["first"].equal(r0["first"]), (name, err)
    assert len(calls) == 5 * layers and set(calls) == ({True, False} if name == "gpt2-tiny" else {False}), calls
print("ok")
"""
    import os
    env = dict(os.environ, TRITON_INTERPRET="1")
    res = subprocess.run([sys.executable, "-c", code, __file__], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_kernel_tolerance_is_a_unit_roundoff_per_layer_and_at_least_the_placement_tolerance():
    assert llm.kernel_tolerance("fp16", 48) == pytest.approx(48 * 2.0 ** -11)  # Code Llama 34B: 0.0234
    assert llm.kernel_tolerance("fp16", 16) == pytest.approx(16 * 2.0 ** -11)
    assert llm.kernel_tolerance("bf16", 16) == pytest.approx(16 * 2.0 ** -8)
    assert llm.kernel_tolerance("fp16", 2) == llm.TOLERANCE == llm.kernel_tolerance("fp32", 80)


def test_matvec_and_compile_choices():
    class A:
        matvec, batch, compile, precision = "auto", 1, "off", "fp16"
    assert llm._want_matvec(A, "device", None)[0] == "cublas"
    assert llm._want_matvec(A, None, None)[0] == "cublas"
    A.batch = 2
    assert llm._want_matvec(A, "pinned,first_touch=none", None) == ("cublas", "batch > 1")
    A.matvec = "cublas"
    assert llm._want_matvec(A, "pinned", None)[0] == "cublas"
    A.matvec = "triton"
    assert llm._want_matvec(A, "device", None)[0] == "triton"
    assert llm._want_compile(A, None) == (False, "--compile off")
    A.compile = "on"
    assert llm._want_compile(A, None) == (True, None)
    triton = pytest.importorskip("triton", reason="Triton is not installed here")
    assert triton
    A.matvec, A.batch = "auto", 1
    from torch.utils._triton import has_triton
    assert llm._want_matvec(A, "pinned,first_touch=none", None)[0] == ("triton" if has_triton() else "cublas")
    A.precision = "fp32"  # cuBLAS's fp32 kernels read host memory at the SM-read ceiling already
    assert llm._want_matvec(A, "pinned,first_touch=none", None)[0] == "cublas"


def test_kernel_classes():
    assert llm.kernel_class("void gemv2T_kernel_val<int, int, __half>") == "matmul"
    assert llm.kernel_class("nvjet_hsh_64x8_64x16_2x1_v_bz_TNN") == "matmul"
    assert llm.kernel_class("pytorch_flash::flash_fwd_splitkv_kernel") == "attention"
    assert llm.kernel_class("void at::native::index_copy_kernel_impl") == "copy"
    assert llm.kernel_class("void at::native::vectorized_elementwise_kernel<4, at::native::silu>") == "other"


def test_modes_map_to_kinds_and_mixed_takes_both():
    assert llm.weights_kind("managed-advice") == "managed,first_touch=none,advise=preferred:cpu+accessed_by:gpu"
    assert llm.weights_kind("mixed") == "pinned,first_touch=none" and llm.cache_kind("mixed") == "device"
    assert llm.weights_kind("mixed", "registered") == "registered" and llm.cache_kind("mixed", "managed") == "managed"
    assert llm.weights_kind("torch") is None
    assert [llm.location(k) for k in (None, "device", "managed,prefetch=gpu", "managed,advise=preferred:cpu",
                                      "pinned", "system")] == ["gpu", "gpu", "gpu", "host", "host", "host"]


def test_token_bound_is_weights_over_the_bandwidth_of_where_they_live():
    desc = {"datapaths": {"gpu_memory": (3000.0, "x"), "h2d": (60.0, "y")}}
    b, path = llm.token_bound({"bytes": 6e9, "extra": {"weights_kind": "device"}}, desc)
    assert path == "gpu_memory" and b == pytest.approx(2e-3)
    b, path = llm.token_bound({"bytes": 6e9, "extra": {"weights_kind": "pinned,first_touch=none"}}, desc)
    assert path == "h2d" and b == pytest.approx(0.1)
    assert llm.token_bound({"bytes": 6e9, "extra": {"weights_kind": "pinned"}}, {"datapaths": {}})[0] is None


def test_plan_runs_the_python_runner_and_llm_stays_out_of_the_default_suite():
    cases = apps.app_cases("llm", ["explicit", "mixed"], {"model": "gpt2-tiny", "weights": "registered"})
    assert [c.params["mode"] for c in cases] == ["explicit", "mixed"]
    argv = cases[1].argv({"device": 0, "allow_oversubscription": True})
    assert argv[:3] == [sys.executable, "-m", "umscope.apps.llm"]
    assert "--weights" in argv and "--allow-oversubscription" in argv and "--device" in argv
    assert not any(c.benchmark == "llm" for c in apps.default_cases())
    with pytest.raises(apps.UsageError, match="unknown mode"):
        apps.app_cases("llm", ["bogus"], {})
    with pytest.raises(apps.UsageError, match="does not take --footprint"):
        apps.app_cases("llm", ["explicit"], {"footprint": "1G"})


@pytest.mark.parametrize("args,text", [
    (["--batch", "0"], "--batch must be at least 1"),
    (["--mode", "explicit", "--weights", "pinned"], "go with --mode mixed"),
    (["--model", "gpt2-tiny", "--prompt", "500", "--tokens", "100"], "exceed gpt2-tiny's 512 positions"),
    (["--allocator", "current"], "cannot capture CUDA graphs"),
    (["--matvec", "triton", "--batch", "2"], "batch-1 decode kernel"),
    (["--compile", "maybe"], "invalid choice"),
])
def test_runner_bad_input_exits_2(args, text):
    res = subprocess.run([sys.executable, "-m", "umscope.apps.llm", *args], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and text in res.stderr


def test_runner_without_gpu_or_torch_skips_with_the_reason():
    from umscope import native
    if native.native_info().get("gpus"):
        pytest.skip("a GPU is present")
    res = subprocess.run([sys.executable, "-m", "umscope.apps.llm", "--model", "gpt2-tiny"], capture_output=True,
                         text=True, timeout=300)
    status = json.loads(res.stdout.strip().splitlines()[-1])
    assert status["status"] == "skipped"
    assert "PyTorch" in status["reason"] or "no CUDA GPU" in status["reason"]


def test_app_run_llm_dry_run_and_bad_mode(store_path):
    res = run_cli("app", "run", "llm", "--mode", "explicit", "--mode", "pinned", "--model", "gpt2-tiny",
                  "--tokens", "8", "--store", store_path, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "llm mode=explicit model=gpt2-tiny tokens=8" in res.stdout
    res = run_cli("app", "run", "llm", "--mode", "bogus", "--store", store_path)
    assert res.returncode == 2 and "unknown mode 'bogus'" in res.stderr
    # --weights/--cache are checked with the run's mode: taken with mixed, refused with any other.
    res = run_cli("app", "run", "llm", "--mode", "mixed", "--weights", "peer:1", "--cache", "device", "--model",
                  "gpt2-tiny", "--store", store_path, "--dry-run")
    assert res.returncode == 0 and "llm cache=device mode=mixed model=gpt2-tiny weights=peer:1" in res.stdout
    res = run_cli("app", "run", "llm", "--mode", "explicit", "--weights", "pinned", "--store", store_path)
    assert res.returncode == 2 and "go with --mode mixed" in res.stderr


def test_report_section_draws_the_bounds():
    from umscope.report.llm import section
    recs = []
    for mode, kind, ms in (("explicit", "device", 2.0), ("pinned", "pinned,first_touch=none", 60.0)):
        extra = {"model": "gpt2-xl", "precision": "fp16", "weights_kind": kind, "cache_kind": kind, "tokens": 100,
                 "prefill_s": 0.01, "tokens_per_s": 1e3 / ms, "verified": "cross-mode-logits", "max_rel_error": 0}
        if mode == "pinned":  # the compiled step with umscope's GEMV: both said, and the compile seconds
            extra.update(compile={"used": True, "seconds": 41.25}, matvec={"used": "triton"},
                         bounds={"where": "host", "protocol": [54.5, "protocol: datasheet x 128 / (128 + 12 + 8)"]})
        base = {"case_id": mode, "kind": mode, "bytes": 3_115_222_400, "extra": extra}
        recs.append(dict(base, op="decode", median=ms / 1e3, min=ms / 1e3, max=ms / 1e3, spread=0.01))
        recs.append(dict(base, op="generate", median=ms / 10, min=ms / 10, max=ms / 10))
    html = section(recs, {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    assert "HBM bound" in html and "host-link bound" in html and "Time for 100 tokens" in html
    assert "<svg" in html and "of datasheet bound" in html and "of protocol bound" in html
    assert "pinned (compiled) (Triton GEMV)" in html and "<td class=num>41.2</td>" in html
    assert "explicit (compiled)" not in html
    # the protocol bound the pinned record carries: its ms per token and % beside the datasheet's, and its source
    tb = 3_115_222_400 / 54.5e9
    assert f"<td class=num>{1e3 * tb:.4g} (54.5 GB/s)</td><td class=num>{100 * tb / 0.060:.1f}%</td>" in html
    assert "host-link protocol bound 1: 54.5 GB/s" in html and "protocol: datasheet x 128 / (128 + 12 + 8)" in html


def test_report_reads_the_compile_seconds_of_older_records():
    from umscope.report.llm import compile_seconds
    assert compile_seconds({"compile": {"used": True, "seconds": 12.5}}) == 12.5
    assert compile_seconds({"compile": {"used": True}, "compile_s": 41.25}) == 41.25  # before compile.seconds
    assert compile_seconds({"compile": {"used": False, "seconds": None}}) is None


def test_protocol_bound_from_the_pcie_counters_of_a_zero_copy_read():
    from umscope.apps import llm_link
    # The H100's counters for 1 GiB read by SMs (docs/counters.md): 128-byte completions with 12-byte headers.
    m = llm_link.from_counters(1 << 30, 1_174_407_168, 134_218_240)
    assert m["completion_payload"] == pytest.approx(128, abs=0.01) and m["completion_header"] == pytest.approx(12, abs=0.01)
    gbps, src = llm_link.protocol_bound(63.0, m)
    assert gbps == pytest.approx(63.0 * 128 / (128 + 12 + 8), rel=1e-4)
    assert "128-byte completions with 12.0-byte headers" in src and "LCRC" in src
    # 256-byte completions (a copy engine's) carry more per header
    m2 = llm_link.from_counters(1 << 30, (1 << 30) * 268 // 256, (1 << 30) // 256 * 16)
    assert llm_link.protocol_bound(63.0, m2)[0] == pytest.approx(63.0 * 256 / (256 + 12 + 8), rel=1e-4)
    with pytest.raises(ValueError):
        llm_link.from_counters(1 << 30, 1 << 29, 1 << 20)  # fewer bytes received than read: not a read's counters


def test_token_bounds_say_why_a_bound_is_missing(monkeypatch):
    from umscope import probe
    from umscope.apps import llm_link
    fp = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    monkeypatch.setattr(probe, "probe", lambda *a, **k: fp)
    b = llm.token_bounds(None, "measure")
    assert b["where"] == "gpu" and b["protocol"] is None and "GPU memory" in b["protocol_why"]
    assert llm.token_bounds("pinned,first_touch=none", "none")["protocol_why"].startswith("not asked")

    def no_counters(*a, **k):
        raise RuntimeError("libumcounters is not built")
    monkeypatch.setattr(llm_link, "measure", no_counters)
    b = llm.token_bounds("pinned,first_touch=none", "measure")
    assert b["where"] == "host" and b["protocol"] is None and "libumcounters is not built" in b["protocol_why"]


def _llm_many(*argvs):
    """Runs llm processes at once (tiny models: the GPU holds them all), each as (records, status, stderr).
    The PCIe split of the protocol bound is not measured in each (--link-counters none unless given)."""
    import os
    env = dict(os.environ, UMSCOPE_LLM_LINK=os.environ.get("UMSCOPE_LLM_LINK", "none"))
    procs = [subprocess.Popen([sys.executable, "-m", "umscope.apps.llm", *a], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for a in argvs]
    out = []
    for p in procs:
        o, e = p.communicate(timeout=600)
        lines = [json.loads(x) for x in o.splitlines() if x.startswith("{")]
        out.append((lines, lines[-1] if lines else {"status": "none"}, e))
    return out


def _llm(*args):
    return _llm_many(args)[0]


@pytest.mark.gpu
@pytest.mark.parametrize("model,modes", [("llama-tiny", [m for m in llm.MODES if m != "torch"]),
                                         ("gpt2-tiny", ["explicit", "managed-advice", "pinned", "mixed"])])
def test_every_placement_gives_the_device_placements_logits(model, modes):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    base = ["--model", model, "--tokens", "8", "--prompt", "8", "--batch", "2"]
    # Mode torch first (it writes the reference the others are checked against), then the others at once.
    results = [_llm(*base, "--mode", "torch")] + _llm_many(*[base + ["--mode", m] for m in modes])
    for mode, (lines, status, err) in zip(["torch"] + modes, results):
        if mode == "system" and status["status"] == "skipped":
            assert "HMM or ATS" in status["reason"]
            continue
        assert status["status"] == "ok", (mode, status, err[-2000:])
        dec = next(r for r in lines if r.get("op") == "decode")
        assert dec["verified"].startswith("cross-mode-logits") and dec["max_rel_error"] <= llm.TOLERANCE
        # The step is compiled by default where Triton is (the GPU machine); compiled kernels round differently
        # from the reference's uncompiled step, so greedy tokens may part at a near tie, and then the prefill and
        # the first step (same inputs) are what is compared.
        assert dec["compile"]["used"] and dec["compile"]["seconds"] > 0 and "compile_s" not in dec, (mode, dec["compile"])
        assert dec["tokens_match"] or dec["logits_compared"] == ["first", "step1"], mode
        assert dec["matvec"]["used"] == "cublas"  # batch 2
        assert dec["n"] == 7 and dec["median"] > 0 and dec["weight_bytes"] == llm.weight_bytes(model, "fp16")
        assert dec["graph"] is True and dec["decode_step"].startswith("CUDA graph")
        if mode not in ("torch",):
            assert dec["allocations"], mode  # the allocator served it
            # Every segment PyTorch's pools hold came from libumalloc, in the placement's kinds.
            served = sum(k["live_bytes"] for k in dec["allocations"].values())
            pools = dec["pool_segment_bytes"]
            if pools and None not in pools.values():
                assert sum(pools.values()) == served, (mode, pools, served)
            kinds = set(dec["allocations"])
            assert any(k.startswith(dec["weights_kind"].split(",")[0]) for k in kinds), (mode, kinds)


@pytest.mark.gpu
def test_host_resident_weights_at_batch_1_take_the_triton_gemv_with_the_device_logits(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from umscope.apps import llm_link
    # The PCIe split of SM zero-copy reads, measured here (umbench linkbytes under libumcounters): a read asks
    # for at most a few hundred bytes per request, and every completion has a header.
    m = llm_link.measure()
    assert 32 <= m["completion_payload"] <= 512 and 0 < m["completion_header"] < 32, m
    split = tmp_path / "link.json"
    split.write_text(json.dumps(m))
    base = ["--model", "gpt2-tiny", "--tokens", "8", "--prompt", "8"]
    _llm(*base, "--mode", "torch")
    modes = (["--mode", "pinned"], ["--mode", "mixed", "--link-counters", str(split)], ["--mode", "explicit"],
             ["--mode", "pinned", "--compile", "off"])
    for extra, (lines, status, err) in zip(modes, _llm_many(*[base + m for m in modes])):
        assert status["status"] == "ok", (extra, status, err[-2000:])
        dec = next(r for r in lines if r.get("op") == "decode")
        b = dec["bounds"]
        assert b["where"] == ("gpu" if "explicit" in extra else "host") and b["datasheet"][0] > 0, extra
        if "--link-counters" in extra:  # the protocol bound: below the datasheet's by the measured packet overhead
            assert b["protocol"][0] == pytest.approx(llm_link.protocol_bound(b["datasheet"][0], m)[0])
            assert b["protocol"][0] < b["datasheet"][0] and "LCRC" in b["protocol"][1]
        else:
            assert b["protocol"] is None and b["protocol_why"], extra
        if "triton" == dec["matvec"]["used"]:
            assert dec["matvec"]["jit_s"] > 0, extra
        assert dec["matvec"]["used"] == ("cublas" if "explicit" in extra else "triton"), extra
        assert dec["compile"]["used"] == ("off" not in extra), extra
        assert dec["max_rel_error"] <= llm.TOLERANCE
        assert dec["tokens_match"] or dec["logits_compared"] == ["first", "step1"], extra


@pytest.mark.gpu
def test_eager_and_current_allocator_give_the_graphs_tokens_and_the_profile_splits_the_step():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    base = ["--model", "llama-tiny", "--tokens", "8", "--prompt", "8"]
    _llm(*base, "--mode", "torch", "--no-graph")  # the eager reference first
    extras = (["--no-graph"], ["--no-graph", "--allocator", "current"])
    runs = _llm_many(base + ["--mode", "explicit", "--profile"], *[base + ["--mode", "pinned"] + x for x in extras])
    lines, status, err = runs[0]
    assert status["status"] == "ok", (status, err[-2000:])
    prof = next(r for r in lines if r.get("op") == "profile")
    assert prof["kernels_per_step"] > 10 and prof["kernel_s_per_step"].get("matmul", 0) > 0
    assert prof["busy_s_per_step"] <= prof["step_s"] * 1.05
    for extra, (lines, status, err) in zip(extras, runs[1:]):
        assert status["status"] == "ok", (extra, status, err[-2000:])
        dec = next(r for r in lines if r.get("op") == "decode")
        assert dec["graph"] is False and dec["max_rel_error"] <= llm.TOLERANCE
        assert dec["tokens_match"] or dec["logits_compared"] == ["first", "step1"], extra


def test_bench_renders_the_table_against_both_bounds_into_its_markers(tmp_path):
    # bench/llm.py --render: saved rows -> the Markdown table, % of the measured and of the datasheet bound
    # (weight bytes / GB/s of where the weights live), written once between its markers.
    import os
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    wb = llm.weight_bytes("llama-8b", "fp16")
    dec = {"median": 0.007, "p10": 0.0069, "p90": 0.0071, "spread": 0.02, "tokens_per_s": 142.9, "total_s": 0.71,
           "bytes": wb, "precision": "fp16", "cache_kind": "device", "graph": True, "verified": "cross-mode-logits",
           "max_rel_error": 0.0}
    rows = [{"type": "header", "commit": "abc1234", "device": "GPU X", "torch": "t", "transformers": "tf",
             "precision": "fp16", "prompt": 32, "tokens": 100, "reps": 3, "command": "python3 bench/llm.py",
             "bounds": {"measured": {"gpu": [3000.0, "measured: umbench"], "host": [50.0, "measured: pinned"]},
                        "datasheet": {"gpu": [3350.0, "datasheet"], "host": [63.0, "PCIe gen 5 x16"]},
                        "protocol": {"gpu": None, "host": [54.5, "protocol: 63.0 x 128 / (128 + 12 + 8)"]}}},
            {"row": "gpt2-xl/mixed-fp16", "model": "gpt2-xl", "mode": "mixed", "status": {"status": "ok"},
             "decode": dict(dec, median=0.065, bytes=llm.weight_bytes("gpt2-xl", "fp16"),
                            weights_kind="pinned,first_touch=none", matvec={"used": "triton"})},
            {"row": "llama-8b/explicit", "model": "llama-8b", "mode": "explicit", "status": {"status": "ok"},
             "decode": dict(dec, weights_kind="device")},
            {"row": "llama-8b/managed-prefetch", "model": "llama-8b", "mode": "managed-prefetch",
             "status": {"status": "ok"}, "decode": dict(dec, median=0.00707, weights_kind="managed,prefetch=gpu")},
            {"row": "gpt2-xl/pinned", "model": "gpt2-xl", "mode": "pinned", "status": {"status": "failed",
                                                                                    "reason": "timed out"},
             "decode": None},
            # compiled rows: managed-prefetch against the compiled torch row (no compiled explicit row)
            {"row": "llama-8b/torch", "model": "llama-8b", "mode": "torch", "status": {"status": "ok"},
             "decode": dict(dec, median=0.006, weights_kind="device", compile={"used": True, "seconds": 21.6},
                            compile_check={"error": 0.004, "tolerance": 0.01, "tokens_match": False,
                                           "uncompiled_s_per_token": 0.00701})},
            {"row": "llama-8b/managed-prefetch", "model": "llama-8b", "mode": "managed-prefetch",
             "status": {"status": "ok"}, "decode": dict(dec, median=0.00603, weights_kind="managed,prefetch=gpu",
                                                        compile={"used": True, "seconds": 20.1},
                                                        logits_compared=["first", "step1"])}]
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    doc = tmp_path / "llm.md"
    doc.write_text("# LLM\n\ntext kept\n")
    env = dict(os.environ, PYTHONPATH=str(root / "python"))
    for _ in range(2):
        res = subprocess.run([sys.executable, str(root / "bench" / "llm.py"), "--render", str(src), "--markdown",
                              str(doc)], capture_output=True, text=True, timeout=120, env=env)
        assert res.returncode == 0, res.stderr
    text = doc.read_text()
    assert text.startswith("# LLM\n\ntext kept\n") and text.count("bench/llm.py table: begin") == 1
    line = next(x for x in text.splitlines() if "| llama-8b |" in x and "| explicit |" in x)
    bound_ms = wb / 3000e9 * 1e3
    assert f"| {bound_ms:.3f} | {100 * bound_ms / 7.0:.1f}% | - | {100 * wb / 3350e9 / 0.007:.1f}% |" in line
    hb = llm.weight_bytes("gpt2-xl", "fp16")
    host = next(x for x in text.splitlines() if "| gpt2-xl |" in x and "Triton GEMV" in x)
    assert (f"| {hb / 50e9 * 1e3:.3f} | {100 * hb / 50e9 / 0.065:.1f}% | {100 * hb / 54.5e9 / 0.065:.1f}% | "
            f"{100 * hb / 63e9 / 0.065:.1f}% |") in host
    assert "protocol, weights in host memory (read in place over the link): 54.5 GB/s (protocol: 63.0" in text
    # A run saved without a protocol bound gets the one of a stored split (--link-counters), said to be stored.
    old = dict(rows[0], bounds={k: v for k, v in rows[0]["bounds"].items() if k != "protocol"})
    src.write_text("\n".join(json.dumps(r) for r in [old] + rows[1:]) + "\n")
    split = tmp_path / "link.json"
    split.write_text(json.dumps({"payload_bytes": 1 << 30, "pcie_read_bytes": (1 << 30) * 140 // 128,
                                 "pcie_write_bytes": (1 << 30) // 8, "source": "run X"}))
    res = subprocess.run([sys.executable, str(root / "bench" / "llm.py"), "--render", str(src), "--link-counters",
                          str(split)], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    host = next(x for x in res.stdout.splitlines() if "| gpt2-xl |" in x and "Triton GEMV" in x)
    assert f"| {100 * hb / (63e9 * 128 / 148) / 0.065:.1f}% | {100 * hb / 63e9 / 0.065:.1f}% |" in host
    assert "stored split link.json: run X)" in res.stdout and "per TLP); applied after the run" in res.stdout
    assert line.startswith("| 1 | llama-8b")
    mp = next(x for x in text.splitlines() if "| managed-prefetch |" in x)
    assert "+1.0%" in mp  # against explicit's median
    mpc = [x for x in text.splitlines() if "| managed-prefetch |" in x][1]
    assert "| graph, compiled (20 s) |" in mpc and "+0.5%" in mpc and "greedy tokens diverge later" in mpc
    tc = next(x for x in text.splitlines() if "| torch |" in x)
    assert "compiled vs uncompiled step 0.004 (tolerance 0.01, tokens part later), uncompiled 7.010 ms/token" in tc
    assert "failed: timed out" in text and "abc1234" in text and "measured: umbench" in text


def test_compare_says_whether_the_error_is_within_the_tolerance():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    ref = {k: torch.tensor([[1.0, 2.0]]) for k in ("first", "step1", "last")}
    ref["tokens"] = torch.tensor([[1, 2]])
    seen = dict(ref, step1=torch.tensor([[1.0, 2.02]]), tokens=torch.tensor([[1, 3]]))
    ok = llm._compare(seen, ref, 0.0234, True, torch)  # the tokens part: prefill and first step compared
    assert ok["compared"] == ["first", "step1"] and ok["error"] == pytest.approx(0.01)
    assert "0.01 <= 0.0234" in ok["why"]
    bad = llm._compare(seen, ref, 0.005, True, torch)
    assert "0.01 > 0.005" in bad["why"]
