"""The decoder of the `llm` application (umscope/apps/llm.py): greedy decoding of a transformers causal LM with a
static KV cache, its decode step eager, compiled (torch.compile) or captured as a CUDA graph, its memory in
libumalloc's pools; and where a decode step's time goes (torch.profiler). llm.py builds the model, places it and
keeps the records; this module only runs it. Imported with torch already loaded by the caller."""

import contextlib

from umscope.timing import Stopwatch


def _dynamo_graphs(torch):
    try:
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    except (AttributeError, KeyError, TypeError):
        return None


def _decoder_layers(model):
    """The repeated blocks of a transformers causal LM (Llama: model.layers, GPT-2: transformer.h)."""
    base = getattr(model, "model", None) or getattr(model, "transformer", None)
    return list(getattr(base, "layers", None) or getattr(base, "h", None) or [])


def _in_pool(pool, torch):
    """Allocations of this thread go to `pool` (a torch.cuda.MemPool served by libumalloc); mode torch: none."""
    return torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext()


class Decoder:
    """Greedy decoding with a static KV cache (transformers' StaticCache) and fixed input/output buffers, so
    that one decode step (forward, argmax, next input) can be captured as a CUDA graph and replayed: a
    batch-1 step launches hundreds of small kernels, which eager PyTorch issues slower than the GPU runs
    them. Eager (graph=False) runs the same step function. The cache, the buffers and eager activations
    come from `pool`, a captured step's activations from `gpool` (both in the cache's kind), the weights
    were built in theirs before."""

    def __init__(self, model, config, batch, prompt, tokens, torch, pool=None, gpool=None, compile_step=False):
        from transformers import StaticCache
        self.model, self.torch, self.pool, self.gpool, self.graph = model, torch, pool, gpool, None
        self.graph_error = None
        # compile_step: the step function compiled by torch.compile (inductor, mode default: no CUDA graphs of
        # its own, so the capture below, its pools and the placement stay ours); it fuses the small kernels
        # around the matmuls (RMSNorm, rotary embedding, SiLU * up, residual adds, cache updates, casts).
        # compiled: whether the step that runs is the compiled one (False after a compile failure,
        # compile_error says why); compile_s: wall seconds of the first compiled call (tracing, inductor,
        # Triton), spent in the warm-up, outside every timed step.
        self.compile_requested, self.compiled, self.compile_error, self.compile_s = compile_step, False, None, None
        self.compile_graphs = None  # graphs dynamo compiled in this process (layers: one per decoder layer)
        self.step_fn = self._step
        if compile_step == "layers":
            # Regional: each decoder layer's forward compiled on its own (one graph per layer index, the rest of
            # the step eager), used only inside the decode step (the prefill keeps the layers' own forward): less
            # to trace and lower than the whole step, no fusion across layers.
            layers = _decoder_layers(model)
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 4 * len(layers) + 16))
            self._layer_fns = [(layer, torch.compile(layer.forward, dynamic=False)) for layer in layers]
            self.step_fn = self._step_layers
            self.compiled = True
        elif compile_step:
            self.step_fn = torch.compile(self._step, dynamic=False)
            self.compiled = True
        dev = next(model.parameters()).device
        self.cuda = dev.type == "cuda"
        with _in_pool(pool, torch):
            self.cache = StaticCache(config=config, max_cache_len=prompt + tokens)
            self.ids = torch.zeros((batch, 1), dtype=torch.long, device=dev)
            self.toks = torch.zeros((batch, tokens), dtype=torch.long, device=dev)
            self.pos = torch.zeros((1,), dtype=torch.long, device=dev)
            self.logits = torch.zeros((batch, config.vocab_size), dtype=torch.float32, device=dev)
            self.first = torch.zeros_like(self.logits)
            self.step1 = torch.zeros_like(self.logits)  # the first decode step's logits (its input = prefill's)

    def _emit_token(self, logits):
        nxt = logits.argmax(-1, keepdim=True)
        self.ids.copy_(nxt)
        self.toks.index_copy_(1, self.pos, nxt)
        self.pos.add_(1)

    def prefill(self, ids):
        self.cache.reset()
        self.pos.zero_()
        with _in_pool(self.pool, self.torch):
            out = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True)
            self.first.copy_(out.logits[:, -1, :])
            self._emit_token(self.first)

    def _step(self):
        out = self.model(input_ids=self.ids, past_key_values=self.cache, use_cache=True)
        self.logits.copy_(out.logits[:, -1, :])
        self._emit_token(self.logits)

    def step(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            with _in_pool(self.pool, self.torch):
                self.step_fn()

    def _uncompile(self):
        self.compiled, self.step_fn = False, self._step

    def _step_layers(self):
        """The decode step with each decoder layer's compiled forward (--compile layers)."""
        for layer, fn in self._layer_fns:
            layer.forward = fn
        try:
            self._step()
        finally:
            for layer, _ in self._layer_fns:
                del layer.forward

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _warm(self, ids):
        """Prefill and two steps (the cache is made, cuBLAS picks its kernels, a compiled step is compiled,
        timed); a compile that fails falls back to the eager step, its reason kept."""
        torch = self.torch
        self.prefill(ids)
        with _in_pool(self.gpool if self.gpool is not None else self.pool, torch):
            if self.compiled and self.compile_s is None:
                try:
                    with Stopwatch() as compiling:
                        self.step_fn()
                        self._sync()
                    self.compile_s = compiling.seconds
                    self.compile_graphs = _dynamo_graphs(torch)
                except Exception as e:  # noqa: BLE001 - any compiler failure: the eager step instead
                    self._sync()
                    self.compile_error = f"{type(e).__name__}: " + ((str(e).splitlines() or [""])[0][:300])
                    self._uncompile()
                    self.prefill(ids)
            for _ in range(2):
                self.step_fn()

    def capture(self, ids):
        """Warm up (prefill and two steps on a side stream: the cache is made, cuBLAS picks its kernels, a
        compiled step is compiled), then capture one step. A compiled step whose capture fails is replaced by
        the eager step (compile_error says why) and captured again; on failure the reason is kept and
        decoding stays eager."""
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(s):
                self._warm(ids)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.gpool.id if self.gpool is not None else None, stream=s):
                self.step_fn()
            torch.cuda.synchronize()
            self.graph = g
        except Exception as e:  # noqa: BLE001 - CUDA errors are RuntimeErrors; a compiled step may raise others
            torch.cuda.synchronize()
            why = (str(e).splitlines() or [type(e).__name__])[0][:300]
            if self.compiled:
                self.compile_error = f"capturing the compiled step failed: {why}"
                self._uncompile()
                return self.capture(ids)
            self.graph_error = why

    def generate(self, ids, steps):
        """Prefill then `steps` greedy decode steps; CUDA events between them. Returns (prefill s,
        [step s], prefill logits, last logits, tokens)."""
        torch = self.torch
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 2)]
        torch.cuda.synchronize()
        ev[0].record()
        self.prefill(ids)
        ev[1].record()
        for t in range(steps):
            self.step()
            ev[t + 2].record()
            if t == 0:
                self.step1.copy_(self.logits)  # in step 2's time: one copy of batch x vocab floats
        torch.cuda.synchronize()
        prefill = ev[0].elapsed_time(ev[1]) / 1e3
        step_s = [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(1, steps + 1)]
        return prefill, step_s, self.first.cpu(), self.logits.cpu(), self.toks[:, :steps + 1].cpu()

    def logits_seen(self):
        """{'first': prefill logits, 'step1': the first decode step's, 'last': the last step's} of the last
        generation, on the CPU."""
        return {"first": self.first.cpu(), "step1": self.step1.cpu(), "last": self.logits.cpu()}


PROFILE_STEPS = 10  # decode steps under the profiler (each step of an 8B model is ~1500 kernel records)
KERNEL_CLASSES = (("attention", ("flash", "fmha", "attention", "sdpa", "efficient")),
                  ("matmul", ("gemv", "gemm", "cutlass", "xmma", "nvjet", "cublas", "splitk", "dot_kernel")),
                  ("copy", ("memcpy", "memset", "copy_kernel", "catarray", "index_copy", "indexcopy")))


def kernel_class(name) -> str:
    low = name.lower()
    for cls, keys in KERNEL_CLASSES:
        if any(k in low for k in keys):
            return cls
    return "other"


def _profile(dec, ids, steps, wbytes, torch):
    """Where a decode step's time goes: torch.profiler (CUPTI) over `steps` decode steps; the
    kernels' GPU time per step by class (matmul: the weight reads; attention; copies; other: norms,
    rotary, activations, argmax), kernels per step, and the GPU time between kernels (launch gaps)."""
    from torch.profiler import ProfilerActivity, profile
    dec.prefill(ids)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        e0.record()
        for _ in range(steps):
            dec.step()
        e1.record()
        torch.cuda.synchronize()
    wall = e0.elapsed_time(e1) / 1e3 / steps
    by, n, top = {}, 0, {}
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA") and not getattr(ev, "is_user_annotation", False):
            t = ev.time_range.elapsed_us() / 1e6
            c = kernel_class(ev.name)
            by[c] = by.get(c, 0.0) + t
            top[ev.name] = top.get(ev.name, 0.0) + t
            n += 1
    busy = sum(by.values()) / steps
    per = {c: v / steps for c, v in by.items()}
    mm = per.get("matmul")
    return {"op": "profile", "step_s": wall, "kernels_per_step": n / steps, "kernel_s_per_step": per,
            "busy_s_per_step": busy, "gap_s_per_step": max(wall - busy, 0.0),
            "matmul_gbps": wbytes / mm / 1e9 if mm else None,
            "top_kernels": sorted(((k, v / steps) for k, v in top.items()), key=lambda kv: -kv[1])[:8],
            "how": "torch.profiler (CUPTI kernel records) over one generation's decode steps; matmul_gbps = "
                   "weight bytes / matmul kernel time per step"}
