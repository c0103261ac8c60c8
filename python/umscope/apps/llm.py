"""The `llm` application: autoregressive greedy decoding with Hugging Face transformers models of real
architectures and sizes, built from their configurations with RANDOM weights (nothing is downloaded;
every record says so), their memory placed in a memory kind by libumalloc installed as PyTorch's
allocator.

    python -m umscope.apps.llm --model gpt2-xl --mode managed-prefetch [--tokens 100] [--prompt 32] [--batch 1]

(`umscope app run llm --mode M --model NAME` runs it as a case in the store.) Prints JSON-lines records and
a status line, as umbench does. Timing: CUDA events around the prefill and each decode step, after an
untimed warm-up generation; per-token time is the median over the decode steps, spread (max - min) /
median. Verification: the prefill logits and the last step's logits are compared with those of PyTorch's
own allocator in device memory (mode `torch`, same seed, computed once per configuration in a child
process and kept in a reference file): `verified: cross-mode-logits`.

Modes: torch (PyTorch's caching allocator, the reference), explicit (device), managed, managed-prefetch,
managed-advice (preferred:cpu + accessed_by:gpu), pinned, registered, system (HMM/ATS), and mixed (the
weights in --weights KIND, the KV cache and activations in --cache KIND: the allocator's kind is switched
once the model is built).

This module imports torch only when it runs a case, so the plan and the bounds work without PyTorch."""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

from umscope.timing import Stopwatch
# The decoder lives beside (llm_decoder.py); kernel_class is named here too, as llm.kernel_class, for its callers.
from umscope.apps.llm_decoder import (PROFILE_STEPS, Decoder, _decoder_layers, _in_pool, _profile,  # noqa: F401
                                      kernel_class)

GPT2_BASE = {"vocab_size": 50257, "n_positions": 1024}
LLAMA_BASE = {"vocab_size": 128256, "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
              "hidden_act": "silu"}
LLAMA2 = {"vocab_size": 32000, "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": False}
# Sizes of the published configurations (GPT-2: Radford et al. 2019; Llama 3.2 1B/3B, Llama 3.1 8B);
# the tiny ones are for tests.
MODELS = {
    "gpt2-tiny": ("gpt2", {"n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 1024, "n_positions": 512,
                           "bos_token_id": 0, "eos_token_id": 0}),
    "gpt2": ("gpt2", {"n_embd": 768, "n_layer": 12, "n_head": 12}),
    "gpt2-medium": ("gpt2", {"n_embd": 1024, "n_layer": 24, "n_head": 16}),
    "gpt2-large": ("gpt2", {"n_embd": 1280, "n_layer": 36, "n_head": 20}),
    "gpt2-xl": ("gpt2", {"n_embd": 1600, "n_layer": 48, "n_head": 25}),
    "llama-tiny": ("llama", {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
                             "max_position_embeddings": 1024}),
    "llama-1b": ("llama", {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": True}),
    "llama-3b": ("llama", {"hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
                           "num_attention_heads": 24, "num_key_value_heads": 8, "tie_word_embeddings": True}),
    "llama-8b": ("llama", {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False}),
    # Llama 2 7B and 13B (Touvron et al. 2023), the models of fusco2024's Fig. 17.
    "llama2-7b": ("llama", dict(LLAMA2, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                                num_attention_heads=32, num_key_value_heads=32)),
    "llama2-13b": ("llama", dict(LLAMA2, hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                                 num_attention_heads=40, num_key_value_heads=40)),
    # Code Llama 34B (Roziere et al. 2023; Llama 2 architecture, grouped-query attention): the largest
    # published Llama configuration whose fp16 weights (67 GB) fit in an 80 GB GPU.
    "codellama-34b": ("llama", dict(LLAMA2, hidden_size=8192, intermediate_size=22016, num_hidden_layers=48,
                                    num_attention_heads=64, num_key_value_heads=8, rope_theta=1000000.0,
                                    max_position_embeddings=16384)),
}
# Memory mode -> the allocator's kind (None: PyTorch's own allocator). first_touch=none: the weights are
# written by the GPU's initialisation, the cache and activations by the GPU; nothing is touched before.
MODES = {
    "torch": None,
    "explicit": "device",
    "managed": "managed,first_touch=none",
    "managed-prefetch": "managed,first_touch=none,prefetch=gpu",
    "managed-advice": "managed,first_touch=none,advise=preferred:cpu+accessed_by:gpu",
    "pinned": "pinned,first_touch=none",
    "registered": "registered,first_touch=none",
    "system": "system,first_touch=none",
    "mixed": None,  # --weights / --cache
}
DTYPES = ("fp16", "bf16", "fp32")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
WEIGHTS_NOTE = "random (built from the configuration with transformers, nothing downloaded)"
TOLERANCE = 1e-3  # max |logit - reference| / max |reference|, the same kernels in another placement
# Another kernel sequence for the same step (the compiled step against the uncompiled one, umscope's GEMV against
# cuBLAS's) rounds differently, and the differences add up layer after layer (the worst-case forward error of a
# sequence of rounded operations grows linearly with its length): one unit roundoff of the precision per layer,
# and at least TOLERANCE. Measured on the H100 (docs/llm.md), compiled vs uncompiled in fp16: Llama 3.2 1B (16
# layers) 2.8e-3 = 0.36 u per layer, Code Llama 34B (48 layers) 1.08e-2 = 0.46 u per layer (a first, flat 1e-2
# failed it).
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "fp32": 2.0 ** -24}


def kernel_tolerance(precision, layers) -> float:
    return max(TOLERANCE, UNIT_ROUNDOFF[precision] * max(int(layers), 1))


def weights_kind(mode, weights=None):
    return (weights or "pinned,first_touch=none") if mode == "mixed" else MODES[mode]


def cache_kind(mode, cache=None):
    return (cache or "device") if mode == "mixed" else MODES[mode]


def param_count(model) -> int:
    """Parameters of a configuration, from the architecture's shapes (no torch needed)."""
    arch, c = MODELS[model]
    if arch == "gpt2":
        c = dict(GPT2_BASE, **c)
        d, L, v, p = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
        per = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
        return v * d + p * d + L * per + 2 * d  # tied output head
    c = dict(LLAMA_BASE, **c)
    d, L, v, f = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    kv = d // c["num_attention_heads"] * c["num_key_value_heads"]
    per = d * d + 2 * d * kv + d * d + 3 * d * f + 2 * d
    return v * d + L * per + d + (0 if c.get("tie_word_embeddings") else v * d)


def weight_bytes(model, dtype) -> int:
    return param_count(model) * DTYPE_BYTES[dtype]


def location(kind) -> str:
    """Where weights of this kind are read from in steady state: 'gpu' or 'host' (bounds.location)."""
    from umscope.model import bounds
    if not kind:
        return "gpu"
    name, _, policy = kind.partition(",")
    return bounds.location(name, policy, {})


def token_bound(rec, desc):
    """(seconds per decode step at the peak of where the weights live, datapath) or (None, why): a decode
    step reads every weight once, so the bound is weight bytes / bandwidth (bounds.describe's peaks)."""
    extra = rec.get("extra") or rec
    loc = location(extra.get("weights_kind"))
    path = "gpu_memory" if loc == "gpu" else "h2d"
    peak = (desc.get("datapaths") or {}).get(path)
    if not peak or not rec.get("bytes"):
        return None, f"peak unknown for {path}"
    return rec["bytes"] / (peak[0] * 1e9), path


def token_bounds(wkind, link_counters="none") -> dict:
    """The bandwidths a decode step's weight reads are held to, each with its source: {'where': 'gpu' or
    'host', 'datasheet': [GB/s, source], 'protocol': [GB/s, source] or None, 'protocol_why': ...,
    'link': the PCIe split (host only)}. Host-resident weights: the datasheet rate of the probed link and the
    payload rate of that link in the completions SM reads get (apps/llm_link.py)."""
    from umscope import probe
    from umscope.model import bounds
    where = location(wkind)
    try:
        ds = bounds.describe(probe.probe())["datapaths"].get("gpu_memory" if where == "gpu" else "h2d")
    except Exception as e:  # noqa: BLE001 - no probe here (no umbench, no GPU): the bounds say why
        return {"where": where, "datasheet": None, "protocol": None, "protocol_why": f"probe failed: {str(e)[:200]}"}
    out = {"where": where, "datasheet": list(ds) if ds else None, "protocol": None, "protocol_why": None}
    if where == "gpu":
        out["protocol_why"] = "weights in GPU memory: no host-link protocol"
        return out
    if link_counters == "none":
        out["protocol_why"] = "not asked (--link-counters none)"
        return out
    from umscope.apps import llm_link
    try:
        m = llm_link.measure() if link_counters == "measure" else llm_link.load(link_counters)
    except Exception as e:  # noqa: BLE001 - no counters here (no GPU, profiling refused, a bad file): said why
        out["protocol_why"] = f"PCIe split not measured: {str(e)[:300]}"
        return out
    out["link"] = m
    if ds:
        out["protocol"] = list(llm_link.protocol_bound(ds[0], m))
    else:
        out["protocol_why"] = "datasheet rate of the host link unknown (probe)"
    return out


def reference_dir() -> str:
    return os.environ.get("UMSCOPE_LLM_REFS") or os.path.join(tempfile.gettempdir(),
                                                              f"umscope-llm-refs-{os.getuid()}")


def _flag_value(text):
    if text in ("1", "0"):
        return text == "1"
    raise argparse.ArgumentTypeError(f"{text!r}: give the flag alone, or 1 or 0")


def _flag(p, name, help):
    """A flag given alone (`--profile`) or with 1 or 0 (`--profile 1`: how `umscope app run` passes an
    application's flags, umbench's form)."""
    p.add_argument(name, nargs="?", const=True, default=False, type=_flag_value, help=help)


def parse_args(argv=None):
    a = _parser().parse_args(argv)
    a.graph = not a.no_graph
    return a


def _parser():
    """The runner's options. `umscope app run llm` offers each of them but the ones every `app run` has
    (apps.llm_options), so the two lists cannot drift apart."""
    p = argparse.ArgumentParser(prog="python -m umscope.apps.llm")
    p.add_argument("--model", default="gpt2", choices=list(MODELS), help="model configuration (random weights)")
    p.add_argument("--mode", default="explicit", choices=list(MODES))
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together")
    p.add_argument("--prompt", type=int, default=32, help="prompt length in tokens")
    p.add_argument("--tokens", type=int, default=100, help="new tokens (prefill gives the first)")
    p.add_argument("--precision", default="fp16", choices=DTYPES, help="weights' and activations' type")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated prompt")
    p.add_argument("--weights", help="mixed: kind of the weights (default pinned,first_touch=none)")
    p.add_argument("--cache", help="mixed: kind of the KV cache and activations (default device)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--reps", type=int, default=1, help="timed generations")
    p.add_argument("--warmup", type=int, default=1, help="untimed generations (of 4 tokens) before")
    _flag(p, "--no-graph",
          help="decode eagerly (default: one decode step captured as a CUDA graph and replayed)")
    p.add_argument("--allocator", choices=["pool", "current"], default="pool",
                   help="pool (default): libumalloc serves torch.cuda.MemPools (weights; KV cache and "
                        "activations; the captured step's activations); current: libumalloc replaces PyTorch's "
                        "allocator (change_current_allocator), which gives graphs no private pool: eager only")
    p.add_argument("--compile", choices=["auto", "on", "layers", "off"], default="auto",
                   help="compile the decode step with torch.compile (inductor) before it is captured: fuses the "
                        "small kernels around the matmuls; auto (default): on where Triton is available, with the "
                        "eager step as the fallback if compiling or capturing fails (the record says which ran); "
                        "layers: each decoder layer compiled on its own (less compile time, fewer fusions)")
    p.add_argument("--matvec", choices=["auto", "cublas", "triton"], default="auto",
                   help="the decode step's matrix-vector products: cublas (PyTorch's), triton (umscope's split-K "
                        "kernel, apps/llm_gemv.py, batch 1); auto (default): triton where half-precision weights are "
                        "read in place from host memory at batch 1, cublas elsewhere")
    p.add_argument("--link-counters", default=os.environ.get("UMSCOPE_LLM_LINK", "measure"),
                   help="host-resident weights: the PCIe completion payload/header split for the protocol bound of "
                        "the host link (apps/llm_link.py): a JSON file written by `python -m umscope.apps.llm_link "
                        "--out FILE` (bench/llm.py passes the one it measured), 'measure' (default; "
                        "$UMSCOPE_LLM_LINK overrides) to measure it here, 'none' to leave the bound out")
    _flag(p, "--profile",
          help="also record where a decode step's time goes (torch.profiler over one generation)")
    p.add_argument("--allow-oversubscription", action="store_true")
    p.add_argument("--allow-host-overcommit", action="store_true")
    # The runner passes every case its --placement; a PyTorch process is not pinned by umscope.
    p.add_argument("--placement", choices=["local", "remote", "none"], help=argparse.SUPPRESS)
    p.add_argument("--reference-only", action="store_true", help=argparse.SUPPRESS)
    return p


def validate(a):
    """Bad input: a reason (str), else None."""
    for k in ("batch", "prompt", "tokens", "reps"):
        if getattr(a, k) < 1:
            return f"--{k} must be at least 1"
    if a.warmup < 0:
        return "--warmup must be 0 or more"
    if a.placement in ("local", "remote"):
        return "--placement local/remote pins umbench; the llm application (PyTorch) is not pinned: use --placement none"
    if (a.weights or a.cache) and a.mode != "mixed":
        return "--weights and --cache go with --mode mixed"
    if a.matvec == "triton" and a.batch != 1:
        return "--matvec triton is the batch-1 decode kernel: use --batch 1"
    if a.allocator == "current" and a.graph:
        return ("--allocator current cannot capture CUDA graphs (PyTorch's pluggable allocator as the current "
                "allocator gives a graph no private pool): add --no-graph")
    arch, c = MODELS[a.model]
    limit = c.get("n_positions", GPT2_BASE["n_positions"]) if arch == "gpt2" else \
        c.get("max_position_embeddings", LLAMA_BASE["max_position_embeddings"])
    if a.prompt + a.tokens > limit:
        return f"--prompt + --tokens ({a.prompt + a.tokens}) exceed {a.model}'s {limit} positions"
    return None


def _emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _status(status, reason=""):
    _emit({"type": "status", "status": status, "reason": reason})
    return 0 if status in ("ok", "skipped", "refused") else 1


def _compile_arg(compile_step) -> str:
    return {False: "off", True: "on", "layers": "layers"}[compile_step]


def _key(a, torch, compile_step=False) -> str:
    # One reference per step kind (compiled or not); v2: it holds the first decode step's logits too.
    text = json.dumps(["v2", a.model, MODELS[a.model], a.precision, a.batch, a.prompt, a.tokens, a.seed, a.graph,
                       _compile_arg(compile_step),
                       torch.__version__,
                       torch.cuda.get_device_name(a.device)])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _build(a, torch, pool=None):
    import transformers
    arch, c = MODELS[a.model]
    if arch == "gpt2":
        config = transformers.GPT2Config(**dict(GPT2_BASE, **c))
    else:
        config = transformers.LlamaConfig(**dict(LLAMA_BASE, **c))
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[a.precision]
    torch.manual_seed(a.seed)
    # Built on the GPU (its allocations go to the weights' kind), initialised there by the model's own
    # random initialisation: the same kernels and seed in every placement give the same weights.
    with torch.device(f"cuda:{a.device}"), _in_pool(pool, torch):
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        except TypeError:
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
    model.eval()
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return model, total, config


def _reference(a, key, torch, compile_step=False):
    """The mode-`torch` logits of this configuration and step kind: from the reference file, computing it in a
    child first."""
    import subprocess
    path = os.path.join(reference_dir(), key + ".pt")
    if not os.path.exists(path):
        argv = [sys.executable, "-m", "umscope.apps.llm", "--model", a.model, "--mode", "torch", "--batch",
                str(a.batch), "--prompt", str(a.prompt), "--tokens", str(a.tokens), "--precision", a.precision,
                "--seed", str(a.seed), "--device", str(a.device), "--reference-only", "--warmup", "0",
                "--compile", _compile_arg(compile_step)]
        if not a.graph:
            argv.append("--no-graph")
        # Its progress lines go to this process's stderr; its records are not this run's.
        res = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=3600)
        if not os.path.exists(path):
            return None, f"the reference run (mode torch) failed: {res.stdout.strip()[-300:]}"
    return torch.load(path), None


def _want_matvec(a, wkind, torch):
    """('cublas' or 'triton', why): auto takes umscope's Triton GEMV where half-precision weights are read in place
    from host memory at batch 1 (several of cuBLAS's half-precision choices read host memory at half the link's
    speed or less), cuBLAS elsewhere."""
    if a.matvec != "auto":
        return a.matvec, f"--matvec {a.matvec}"
    if not wkind or location(wkind) != "host":
        return "cublas", "weights in GPU memory"
    if a.batch != 1:
        return "cublas", "batch > 1"
    if a.precision == "fp32":
        return "cublas", "fp32: cuBLAS's kernels read host memory as fast as umscope's (docs/llm.md)"
    return ("triton", "weights read in place from host memory, batch 1") if _has_triton() else \
        ("cublas", "Triton is not available here")


def _has_triton() -> bool:
    """Whether PyTorch finds a working Triton (what torch.compile's inductor and the Triton GEMV need)."""
    try:
        from torch.utils._triton import has_triton
    except ImportError:
        return False
    return has_triton()


def _want_compile(a, torch):
    """(compile the decode step?, why not): --compile on/off, or auto: on where Triton is available."""
    if a.compile == "off":
        return False, "--compile off"
    if a.compile == "on":
        return True, None
    if a.compile == "layers":
        return "layers", None
    return (True, None) if _has_triton() else (False, "Triton is not available to torch.compile here")


def _compare(seen, ref, tol, other_kernels, torch) -> dict:
    """Logits of a run against a reference: prefill ('first'), first decode step ('step1', the same input and
    cache in both) and last step. Kernels that round differently (other_kernels) may part greedy tokens at a
    near tie of random weights' logits; from there the inputs differ, so the last step is compared only if the
    tokens are the same."""
    tokens_match = bool(torch.equal(seen["tokens"], ref["tokens"]))
    compared = ["first", "step1", "last"] if tokens_match or not other_kernels else ["first", "step1"]
    errs = {k: _rel(seen[k], ref[k]) for k in compared}
    err = max(errs.values())
    return {"tokens_match": tokens_match, "compared": compared, "rel_error": errs, "error": err, "tolerance": tol,
            "why": f"max relative error {err:.3g} {'>' if err > tol else '<='} {tol} "
                   f"({', '.join(f'{k} {v:.3g}' for k, v in errs.items())})"}


def _rel(a, b) -> float:
    scale = float(b.abs().max()) or 1.0
    return float((a - b).abs().max()) / scale


def main(argv=None) -> int:
    a = parse_args(argv)
    why = validate(a)
    if why:
        sys.stderr.write(f"llm: error: {why}\n")
        _status("usage", why)
        return 2
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        return _status("skipped", f"PyTorch and transformers are needed for the llm application: {e}")
    if not torch.cuda.is_available():
        return _status("skipped", "no CUDA GPU visible to PyTorch")
    _progress(f"torch {torch.__version__} imported; {a.model} {a.precision}, mode {a.mode}")
    wkind, ckind = weights_kind(a.mode, a.weights), cache_kind(a.mode, a.cache)
    lib = None
    if wkind is not None:
        from umscope import place
        lib = place.library_path()
        if lib is None:
            return _status("skipped", "this umscope was built without libumalloc (no CUDA toolkit at build time)")
        try:
            place.configure(wkind, "", 1 if a.allow_oversubscription else 0, lib)
            if ckind != wkind:
                place.set_kind(ckind, lib)  # checked now; switched back below
                place.configure(wkind, "", -1, lib)
        except Exception as e:  # noqa: BLE001 - a bad --weights/--cache kind
            sys.stderr.write(f"llm: error: {e}\n")
            _status("usage", str(e))
            return 2
        if a.allocator == "current":
            torch.cuda.memory.change_current_allocator(
                torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free"))
    torch.cuda.set_device(a.device)
    free, total = torch.cuda.mem_get_info(a.device)
    need = weight_bytes(a.model, a.precision)
    if wkind is None or location(wkind) == "gpu" and not wkind.startswith("managed"):
        if need > free:
            return _status("skipped", f"{a.model} needs {need / 2**30:.2f} GiB of weights, more than the "
                           f"{free / 2**30:.2f} GiB of GPU memory free: past GPU capacity it runs only in "
                           "host-resident kinds (pinned, registered, system) or managed with --allow-oversubscription")
    elif wkind.startswith("managed") and need > free and not a.allow_oversubscription:
        return _status("refused", f"{a.model} needs {need / 2**30:.2f} GiB of managed memory, more than the "
                       f"{free / 2**30:.2f} GiB of GPU memory free, and oversubscribing a shared GPU can hang it; "
                       "pass --allow-oversubscription on a machine you own")
    if wkind and wkind.startswith("system"):
        from umscope import native
        gpus = native.native_info().get("gpus") or []
        g = next((g for g in gpus if g.get("device") == a.device), {})
        if not g.get("pageable_memory_access"):
            return _status("skipped", "the GPU cannot access pageable host memory on this machine "
                           "(cudaDevAttrPageableMemoryAccess = 0: no HMM or ATS)")
    if wkind and location(wkind) == "host" and not a.allow_host_overcommit:
        avail = _mem_available()
        if avail and need > avail:
            return _status("refused", f"{need / 2**30:.2f} GiB of host memory needed, {avail / 2**30:.2f} GiB "
                           "available (MemAvailable); pass --allow-host-overcommit to try anyway")
    compile_step, compile_why = _want_compile(a, torch)
    link_bounds = None if a.reference_only else token_bounds(wkind, a.link_counters)
    key = _key(a, torch, compile_step)
    ref = None
    if a.mode != "torch":  # the reference first, so that two models never share the GPU
        _progress(f"reference (mode torch) of {a.model} {a.precision}")
        ref, why = _reference(a, key, torch, compile_step)
        if ref is None:
            return _status("failed", why)
    wpool = cpool = gpool = None
    if lib and a.allocator == "pool":
        # PyTorch's caching allocator keeps serving tensors, each pool's segments come from libumalloc in
        # the kind configured when the pool grows: CUDA graphs can be captured (the pluggable allocator as
        # the current allocator cannot), and the placement is the same.
        alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free").allocator()
        wpool, cpool, gpool = (torch.cuda.MemPool(alloc) for _ in range(3))
    prof = None
    try:
        with torch.inference_mode():
            with Stopwatch() as build:
                model, wbytes, config = _build(a, torch, wpool)
                n_layers = len(_decoder_layers(model))
                torch.cuda.synchronize()
            build_s = build.seconds
            _progress(f"{a.model} built in {build_s:.1f} s ({wbytes / 2**30:.2f} GiB of weights in {wkind or 'device'})")
            if lib and ckind != wkind:
                from umscope import place
                place.set_kind(ckind, lib)
            matvec, matvec_why = _want_matvec(a, wkind, torch)
            matvec_jit_s = None
            if matvec == "triton":
                from umscope.apps import llm_gemv
                _progress(f"{llm_gemv.install(model, torch)} layers' one-row products through the Triton GEMV")
                matvec_jit_s = llm_gemv.warm(model, torch)
                _progress(f"Triton GEMV compiled for the model's shapes in {matvec_jit_s:.1f} s (untimed)")
            g = torch.Generator().manual_seed(a.seed)
            ids = torch.randint(0, config.vocab_size, (a.batch, a.prompt), generator=g).to(f"cuda:{a.device}")
            dec = Decoder(model, config, a.batch, a.prompt, a.tokens, torch, cpool, gpool, compile_step)
            if a.graph:
                dec.capture(ids)
                _progress(("compiled " if dec.compiled else "") +
                          ("decode step captured as a CUDA graph" if dec.graph is not None else "capture failed") +
                          (f" (compiled in {dec.compile_s:.1f} s)" if dec.compiled else "") +
                          (f"; compile fell back to the eager step: {dec.compile_error}" if dec.compile_error else ""))
                if dec.graph is None:
                    return _status("failed", f"CUDA graph capture failed ({dec.graph_error}); --no-graph decodes "
                                   "eagerly")
            else:
                dec._warm(ids)
            cold = None
            for _ in range(a.warmup):
                cold = cold or dec.generate(ids, min(3, a.tokens - 1))[0]
            runs = []
            for i in range(a.reps):
                runs.append(dec.generate(ids, a.tokens - 1))
                _progress(f"generation {i + 1}/{a.reps}: {1e3 * sorted(runs[-1][1])[len(runs[-1][1]) // 2]:.3f} "
                          "ms per token")
            seen = dict(dec.logits_seen(), tokens=runs[-1][4], compiled=dec.compiled, matvec=matvec)
            if a.profile:
                prof = _profile(dec, ids, min(a.tokens - 1, PROFILE_STEPS), wbytes, torch)
            if a.mode == "torch" and dec.compiled and not a.reference_only:
                # The compiled step checked against the uncompiled one: the same model, a second decoder.
                _progress("check: the uncompiled step on the same model")
                rdec = Decoder(model, config, a.batch, a.prompt, a.tokens, torch, cpool, gpool)
                if a.graph:
                    rdec.capture(ids)
                else:
                    rdec._warm(ids)
                _, rsteps, _, _, rtoks = rdec.generate(ids, a.tokens - 1)
                uncompiled = dict(rdec.logits_seen(), tokens=rtoks)
                uncompiled_s = sorted(rsteps)[len(rsteps) // 2]
                del rdec
            pools = {}
            for name, pool in (("weights", wpool), ("cache", cpool), ("graph", gpool)):
                if pool is not None:
                    try:
                        pools[name] = sum(seg["total_size"] for seg in pool.snapshot())
                    except (AttributeError, RuntimeError, TypeError):
                        pools[name] = None
    except RuntimeError as e:
        msg = str(e)
        if "umscope place: refusing" in msg:
            return _status("refused", msg.splitlines()[0][:500])
        return _status("failed", msg.splitlines()[0][:500] if msg else type(e).__name__)
    prefill_s = sorted(r[0] for r in runs)[len(runs) // 2]
    steps = [s for r in runs for s in r[1]]
    verified = "cross-mode-logits"
    compile_check = None
    ktol = kernel_tolerance(a.precision, n_layers)
    if a.mode == "torch":  # this run is the reference of the other placements (of the same step: compiled or not)
        ref, verified = seen, "cross-mode-logits (the reference itself)"
        os.makedirs(reference_dir(), exist_ok=True)
        tmp = os.path.join(reference_dir(), f".{key}.{os.getpid()}")
        torch.save(ref, tmp)
        os.replace(tmp, os.path.join(reference_dir(), key + ".pt"))
        if a.reference_only:
            return _status("ok")
        if dec.compiled:
            compile_check = dict(_compare(seen, uncompiled, ktol, True, torch),
                                 uncompiled_s_per_token=uncompiled_s,
                                 how="the uncompiled step on the same model and inputs, one generation, after the "
                                     "compiled step's; time per token: its median step (CUDA events)")
            if compile_check["error"] > compile_check["tolerance"]:
                return _status("failed", "the compiled step's logits differ from the uncompiled step's: " +
                               compile_check["why"])
    # The same kernels (the placement alone differs) must give the reference's logits to TOLERANCE (in practice
    # bit for bit); another kernel (a compiled step against an uncompiled reference after a fallback, umscope's
    # GEMV against cuBLAS) rounds differently: kernel_tolerance (a unit roundoff of the precision per layer).
    same = bool(ref.get("compiled", False)) == dec.compiled and ref.get("matvec", "cublas") == matvec
    check = _compare(seen, ref, TOLERANCE if same else ktol, not same, torch)
    tokens_match, compared, errs, err = check["tokens_match"], check["compared"], check["rel_error"], check["error"]
    if err > check["tolerance"]:
        return _status("failed", "logits differ from the device placement's (PyTorch's allocator, same seed): " +
                       check["why"])
    steps_sorted = sorted(steps)
    med = steps_sorted[len(steps) // 2]
    total_s = prefill_s + sum(runs[len(runs) // 2][1])
    stats = {}
    if lib:
        from umscope import place
        stats = place.stats(lib)
    name = (wkind or "device").partition(",")
    common = {"type": "record", "benchmark": "llm", "processor": "gpu", "kind": a.mode, "policy": "",
              "bytes": wbytes, "threads": None, "model": a.model, "architecture": MODELS[a.model][0],
              "config": MODELS[a.model][1], "precision": a.precision, "batch": a.batch, "prompt": a.prompt,
              "tokens": a.tokens, "seed": a.seed, "weights": WEIGHTS_NOTE, "weights_kind": wkind or "device",
              "cache_kind": ckind or "device", "allocator": "libumalloc" if lib else "pytorch caching allocator",
              "weight_bytes": wbytes, "verified": verified, "max_rel_error": err,
              "tokens_match": tokens_match, "reference": "mode torch (PyTorch's caching allocator, device memory)",
              "torch": torch.__version__, "transformers": transformers.__version__, "build_s": round(build_s, 3),
              "weights_kind_name": name[0], "graph": bool(a.graph),
              "decode_step": ("CUDA graph of one " + ("compiled " if dec.compiled else "") +
                              "step (static KV cache), replayed") if a.graph else
              ("compiled" if dec.compiled else "eager") + " (static KV cache)", "allocator_mode": a.allocator if lib else "torch",
              "pool_segment_bytes": pools or None, "logits_compared": compared,
              "rel_error": errs, "tolerance": check["tolerance"],
              "reference_step": {"compiled": bool(ref.get("compiled", False)), "matvec": ref.get("matvec", "cublas")},
              "compile_check": compile_check,
              "compile": {"requested": a.compile, "used": dec.compiled, "seconds": dec.compile_s,
                          "error": dec.compile_error, "why_not": compile_why,
                          "scope": "decoder layers" if compile_step == "layers" else "step",
                          "graphs": dec.compile_graphs,
                          "how": "torch.compile(dynamic=False) of the whole decode step (scope step) or of each "
                                 "decoder layer (scope decoder layers): inductor, default mode (no CUDA graphs of "
                                 "its own); the compiled step is what the CUDA graph captures"},
              "matvec": {"used": matvec, "requested": a.matvec, "why": matvec_why,
                         "jit_s": None if matvec_jit_s is None else round(matvec_jit_s, 3)},
              "bounds": link_bounds}
    spread = (steps_sorted[-1] - steps_sorted[0]) / med if med else None
    _emit(dict(common, op="decode", metric="time_per_token", unit="s", n=len(steps), median=med,
               min=steps_sorted[0], max=steps_sorted[-1], spread=spread, value=med,
               p10=steps_sorted[len(steps) // 10], p90=steps_sorted[(9 * len(steps)) // 10],
               tokens_per_s=a.batch / med if med else None, total_s=total_s, prefill_s=prefill_s,
               cold_prefill_s=cold, allocations=stats.get("kinds") if stats else None))
    _emit(dict(common, op="prefill", metric="time", unit="s", n=len(runs), median=prefill_s,
               min=min(r[0] for r in runs), max=max(r[0] for r in runs), value=prefill_s, spread=None))
    _emit(dict(common, op="generate", metric=f"time_for_{a.tokens}_tokens", unit="s", n=1, median=total_s,
               min=total_s, max=total_s, value=total_s, spread=None))
    if prof:
        _emit(dict(common, metric="decode_step_breakdown", unit="s", n=min(a.tokens - 1, PROFILE_STEPS),
                   median=prof["step_s"],
                   value=prof["step_s"], spread=None, **prof))
    return _status("ok")


def _progress(text):
    sys.stderr.write(f"llm: [{time.strftime('%H:%M:%S')}] {text}\n")
    sys.stderr.flush()


def _mem_available() -> int:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
