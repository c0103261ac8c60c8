#!/usr/bin/env python3
"""What `umscope place` and profile's sampler cost a PyTorch program per token or step, measured inside
one process (issue 34).

Between two processes of the same launch-bound program the time per token moves by up to 1.3x on the H100 and
H200 (bench/place_compat.py's plain runs, docs/place.md), far more than issue 34's 2% target: a ratio of two
processes decides nothing about it. So this script runs the same work in one process with one of umscope's
parts on and off, in pairs whose order alternates (on first, then off first), after one warm-up of each; Python's
garbage collector runs before each timed half, so its pauses fall outside both. Each pair gives the ratio
on / off; the figure is the median ratio with its distribution-free 95% confidence interval (order statistics of
the pairs' ratios). A target is met where the interval's top is at or under it, missed where its bottom is over
it, else not decided. The interval holds for pairs that are independent of each other: a host whose speed
switches between states lasting several halves breaks that (the H200 of session 18 ran Llama's halves at 9-10 or
15-17 ms/token, either arm), so each half's time is kept to be read beside the verdict, with what the host did
during it (host_spent: this thread's and this process's CPU time, its involuntary context switches, the CPUs
busy and the time stolen, from /proc/stat) and the pairs' ratio of this thread's CPU time, a diagnostic.

--toggle (the part switched):
  route    under `umscope place --kind K`: the route place installed (umscope_torch_route.ROUTE) against the
           route paused (Route.pause), PyTorch's own allocation path as in a plain run. What place adds to a
           step is this route (every allocation goes to a pool whose segments libumalloc makes in the kind); the
           rest happens once, at start-up. Target 1.02 (issue 34: place --kind device at most 2% slower).
  tracer   under `umscope profile --um-trace`: the tracer attached (libumtrace recording its CUPTI records)
           against detached (umtrace_detach: CUPTI taken out of the process by cuptiFinalize at a driver call's
           exit, as if the program ran without it; umtrace_attach puts it back with every record it takes).
           profile's sampler runs beside both halves, as profile runs it. Target 1.03 (issue 34: profile
           --um-trace at most 3% slower per step), the whole of profile's cost being this ratio times the
           sampler's. The tracer switches only where the state changes (pairs alternate their order, so one
           switch a pair): a detach with unified-memory records takes about 2 s, all in CUPTI's taking them out
           (H200, session 21, docs/tracing.md). (Disabling CUPTI's records alone, cuptiActivityDisable, left
           CUPTI in the process: Llama generation ran slower so than recording in 11 of 16 pairs on the H200,
           session 18; a detach is the tracer's absence.)
  sampler  in a plain process: profile's sampler (umscope.profile.sampler.Sampler.sample at profile's period,
           0.1 s, on GPU 0 and this process's tree), run by a child process as `umscope profile` runs it beside
           the program, sampling against idle: the part of profile's cost (target 1.03 for the whole) that is not
           the tracer's.

Work (the models of bench/place_programs/, random weights, nothing downloaded):
  llama   greedy generation with transformers' Llama (generate.py llama), ms per token
  gpt2    the same with gpt2-medium's shape (generate.py gpt2), ms per token
  train   a step of train.py's loop: GPT-2 small, bf16 autocast, gradient checkpointing, AdamW, ms per step
  compiled  a step of compiled.py's loop: a torch.compile'd Transformer encoder, SGD, ms per step (compiled in
          the warm-up)
  graph   a step of graphed.py's loop: new data copied into the static inputs and the captured training step (an
          MLP, SGD) replayed as one CUDA graph, ms per step (captured before the warm-up, once, in the state the
          process starts in: routed under place, attached under profile)
  ddp     a step of ddp.py's loop on every rank torchrun started (8 linear layers 4096 wide, 512 rows, AdamW,
          DistributedDataParallel over NCCL), ms per step on rank 0, which alone prints and writes; every rank runs
          the same pairs in the same order, and each step's gradient reduction keeps the ranks' halves together

    umscope place --kind device -- python3 bench/overhead_ab.py --toggle route [--work llama,gpt2,train,compiled,graph]
    python3 bench/overhead_ab.py --toggle sampler
    umscope place --kind device -- torchrun --standalone --nproc_per_node 2 bench/overhead_ab.py --work ddp
    umscope profile --um-trace -- python3 bench/overhead_ab.py --toggle tracer
        [--pairs 12] [--tokens 64] [--steps 4] [--out DIR]

Prints one line per work and a JSON line (RESULT); with --out (or $OUT) writes overhead_ab-TOGGLE.json after each
work and every 10 pairs (the work in progress marked partial).
Exit 2 on a bad argument or where the part to switch is not in this process (route without place, tracer without
profile --um-trace)."""
import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "place_programs"))  # the programs' own models.py
TARGETS = {"route": 1.02, "sampler": 1.03, "tracer": 1.03}


def median_ci(xs, level=0.95):
    """The median of xs and a distribution-free confidence interval for it: the order statistics x(k), x(n+1-k)
    (1-based) with the largest k such that P(Binomial(n, 1/2) < k) <= (1 - level) / 2. None for the interval
    when n is too small for the level (n < 6 at 95%)."""
    xs = sorted(xs)
    n = len(xs)
    med = statistics.median(xs)
    alpha = (1 - level) / 2
    k, cum = 0, 0.0
    while k < n:
        p_k = math.comb(n, k) / 2 ** n  # P(B = k)
        if cum + p_k > alpha:
            break
        cum += p_k
        k += 1
    if k == 0:
        return med, None
    return med, (xs[k - 1], xs[n - k])


def verdict(ci, target):
    if ci is None:
        return None
    lo, hi = ci
    if hi <= target:
        return True
    if lo > target:
        return False
    return None


def host_now():
    """What the host did so far, for where a half's time went: this thread's and this process's CPU seconds, the
    involuntary context switches of this thread, and from /proc/stat the jiffies every CPU spent busy, in all, and
    stolen by the hypervisor (0 where the kernel does not count steal)."""
    import resource
    cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (time.thread_time(), time.process_time(), resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw,
            sum(cpu) - cpu[3] - cpu[4], sum(cpu), cpu[7] if len(cpu) > 7 else 0)


def host_spent(a, b):
    """The host between two host_now()s: thread and process CPU seconds, involuntary switches, the CPUs busy on
    average (every process's, this one's included) and the CPU seconds stolen."""
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    total = b[4] - a[4]
    return {"thread_cpu_s": b[0] - a[0], "proc_cpu_s": b[1] - a[1], "nivcsw": b[2] - a[2],
            "busy_cpus": (b[3] - a[3]) / total * ncpu if total else None, "steal_s": (b[5] - a[5]) / hz}


def time_it(fn):
    """(seconds, fn's output, host_spent over the half)."""
    import torch
    gc.collect()  # a collection falls before each timed half, never inside one arm more than the other
    torch.cuda.synchronize()
    h0 = host_now()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return dt, out, host_spent(h0, host_now())


def generation(model_name, tokens):
    import torch
    from models import generation_model, generation_prompt  # bench/place_programs/models.py
    config, model = generation_model(model_name)
    prompt = generation_prompt(config)

    def work():
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens,
                                 min_new_tokens=tokens, do_sample=False, pad_token_id=0)
        return out[0, prompt.shape[1]:].tolist()
    return work, tokens, "ms/token"


def training(steps):
    import torch
    from models import train_step, training_model  # bench/place_programs/models.py
    config, model, opt = training_model()
    x = torch.randint(0, config.vocab_size, (8, 256), generator=torch.Generator().manual_seed(2)).cuda()

    def work():
        for _ in range(steps):
            train_step(model, opt, x)
        return None  # each repetition trains on: its losses are not comparable between repetitions
    return work, steps, "ms/step"


def compiled(steps):
    import torch
    from models import compiled_model, compiled_step  # bench/place_programs/models.py
    model, opt, step_fn = compiled_model()
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(16, 128, 512, device="cuda", generator=g)
    y = torch.randint(0, 16, (16, 128), device="cuda", generator=g)

    def work():
        for _ in range(steps):
            compiled_step(step_fn, opt, x, y)
        return None  # it trains on: its losses are not comparable between repetitions
    return work, steps, "ms/step"


def graphed(steps):
    import torch
    from models import graphed_inputs, graphed_model, graphed_step  # bench/place_programs/models.py
    xs, ys, static_x, static_y = graphed_inputs(steps)
    graph, static_loss = graphed_model(static_x, static_y)

    def work():
        for i in range(steps):
            graphed_step(graph, static_x, static_y, xs[i], ys[i])
        return None  # it trains on: its losses are not comparable between repetitions
    return work, steps, "ms/step"


def distributed(steps):
    import torch
    import torch.distributed as dist
    from models import ddp_model, ddp_step  # bench/place_programs/models.py
    if not dist.is_initialized():
        dist.init_process_group("nccl")
    ddp, opt = ddp_model(int(os.environ["LOCAL_RANK"]))
    g = torch.Generator(device="cuda").manual_seed(10 + dist.get_rank())

    def work():
        for _ in range(steps):
            ddp_step(ddp, opt, torch.randn(512, 4096, device="cuda", generator=g))
        return None  # it trains on: its losses are not comparable between repetitions
    return work, steps, "ms/step"


WORKS = {"llama": lambda a: generation("llama", a.tokens), "gpt2": lambda a: generation("gpt2", a.tokens),
         "train": lambda a: training(a.steps), "compiled": lambda a: compiled(a.steps),
         "graph": lambda a: graphed(a.steps), "ddp": lambda a: distributed(a.steps)}


class RouteToggle:
    on_name, off_name = "routed", "paused"

    def __init__(self, route):
        self.route = route

    def run(self, on, fn):
        if on:
            return fn()
        # Paused, not Route.unrouted: that holds the route's lock for the work, and a training step's backward,
        # on autograd's device thread, enters torch.cuda.device where gradient checkpointing restores the random
        # state for its recomputation (torch.utils.checkpoint.set_device_states), which routes the device and
        # waits for that lock while the main thread waits for the backward (seen on the H200: the training work
        # under Route.unrouted never ended, 190 s).
        self.route.pause()
        try:
            return fn()
        finally:
            self.route.resume()

    def close(self):
        pass


DETACH_CODES = {
    0: "already detached",
    -1: "refused: hardware counters or place --managed share the tracer's CUPTI subscriber",
    -2: "no driver call's exit came to detach it within 5 s",
    -3: ("refused: the program's NVTX calls are handed to CUPTI, whose handlers a detach would leave behind "
         "(profile with NVTX_INJECTION64_PATH=/nonexistent keeps NVTX out, or UMSCOPE_UMTRACE_DETACH_NVTX=1 "
         "detaches anyway)")}


class TracerToggle:
    """libumtrace (the library profile --um-trace injected into this process) attached or detached."""
    on_name, off_name = "attached", "detached"

    def __init__(self, lib):
        self.lib = lib
        self.detaches = 0
        self.attached = True  # as the injection left it
        self.detach_s, self.attach_s = [], []  # what each took (outside the timed halves)

    def about(self):
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        return {"detach_s": med(self.detach_s), "attach_s": med(self.attach_s), "detaches": self.detaches,
                **trace_detach_phases(os.environ.get("UMSCOPE_TRACE_FILE"))}

    def _switch(self, attach):
        """Detaches or attaches the tracer between halves (the GPU's work finished first), timing the call."""
        import torch
        torch.cuda.synchronize()
        name = "umtrace_attach" if attach else "umtrace_detach"
        t0 = time.perf_counter()
        r = getattr(self.lib, name)()
        (self.attach_s if attach else self.detach_s).append(time.perf_counter() - t0)
        if r != 1:
            why = "" if attach else f": {DETACH_CODES.get(r, 'unknown')}"
            raise RuntimeError(f"{name} returned {r} (1: {'attached' if attach else 'detached'}){why}")

    def run(self, on, fn):
        """fn in the state asked for, switching only where it differs from the last half's: pairs alternate their
        order (on off, off on, ...), so a pair costs one switch, not a detach and an attach."""
        if on != self.attached:
            self._switch(attach=on)
            self.attached = on
            if not on:
                self.detaches += 1
        return fn()

    def close(self):
        """Leaves the tracer attached, as profile runs it to the program's exit."""
        if not self.attached:
            self._switch(attach=True)
            self.attached = True


def trace_detach_phases(path):
    """From the trace libumtrace is writing (profile's UMSCOPE_TRACE_FILE): the median seconds of each step of its
    detaches and attaches so far, and the most buffers a detach found unwritten; {} where it cannot be read."""
    phases, unwritten = {}, []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if '"detach' not in line and '"attach' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line the tracer is still writing
                if e.get("k") == "phase":
                    phases.setdefault(e["what"], []).append((e["w1"] - e["w0"]) / 1e9)
                elif e.get("k") == "detach":
                    unwritten.append(e.get("unwritten", 0))
    except (OSError, TypeError):
        return {}
    out = {"phases_s": {k: statistics.median(v) for k, v in phases.items()}}
    if unwritten:
        out["unwritten_max"] = max(unwritten)
    return out


def loaded_libumtrace():
    """The path of the libumtrace this process has loaded, or None."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[-1]) == "libumtrace.so":
                return parts[-1]
    return None


SAMPLER_CHILD = """
import sys, threading, time
from umscope.profile.sampler import Sampler
s = Sampler(int(sys.argv[1]), float(sys.argv[2]), [0])
s.warm_up()
state = {"on": False, "end": False}
def read():
    for line in sys.stdin:
        state["on"] = line.strip() == "on"
        print("ack", flush=True)
    state["end"] = True  # the parent closed the pipe or died: never outlive it
threading.Thread(target=read, daemon=True).start()
print("ready", flush=True)
while not state["end"]:
    if state["on"]:
        s.sample()
    time.sleep(s.period)
"""


class SamplerToggle:
    on_name, off_name = "sampling", "idle"

    def __init__(self, period=0.1):
        import subprocess
        self.proc = subprocess.Popen([sys.executable, "-c", SAMPLER_CHILD, str(os.getpid()), str(period)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the sampler's child process did not start")

    def _say(self, word):
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def run(self, on, fn):
        if not on:
            return fn()
        self._say("on")
        try:
            return fn()
        finally:
            self._say("off")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


def record(toggle, name, unit, t_on, t_off, target, same, first_on, h_on=(), h_off=()):
    """The work's record from the pairs measured so far; h_on, h_off: each half's host_spent, and from them the
    pairs' ratio of this thread's CPU time on / off with its interval (a diagnostic beside the verdict, which is
    the wall time's: a cost or a host's noise that is not this thread's CPU time shows in one and not the other)."""
    ratios = [x / y for x, y in zip(t_on, t_off)]
    med, ci = median_ci(ratios) if ratios else (None, None)
    cpu = [x["thread_cpu_s"] / y["thread_cpu_s"] for x, y in zip(h_on, h_off) if y["thread_cpu_s"] > 0]
    cpu_med, cpu_ci = median_ci(cpu) if cpu else (None, None)
    return {"host_on": list(h_on), "host_off": list(h_off), "cpu_ratio_median": cpu_med, "cpu_ratio_ci95": cpu_ci,
            "work": name, "unit": unit, "pairs": len(ratios), "on": toggle.on_name, "off": toggle.off_name,
            "times_on": list(t_on), "times_off": list(t_off), "median_on": statistics.median(t_on) if t_on else None,
            "median_off": statistics.median(t_off) if t_off else None, "ratios": ratios, "ratio_median": med,
            "ratio_ci95": ci, "target": target, "meets_target": verdict(ci, target),
            "outputs_equal": same if first_on is not None else None}


def measure(toggle, name, work, per, unit, pairs, target, progress=None, every=10):
    """Warm-up of each half, then `pairs` pairs in alternating order; returns the work's record. progress, where
    given, gets the record so far (marked partial) after every `every` pairs, outside the timed halves: a run cut
    short (session 19: a 900-pair training A/B stopped by its time limit) keeps what it measured."""
    on = lambda: toggle.run(True, lambda: time_it(work))  # noqa: E731
    off = lambda: toggle.run(False, lambda: time_it(work))  # noqa: E731
    first_on, first_off = on()[1], off()[1]
    t_on, t_off, same, h_on, h_off = [], [], first_on == first_off, [], []
    for i in range(pairs):
        for fn in ((on, off) if i % 2 == 0 else (off, on)):
            dt, out, host = fn()
            (t_on if fn is on else t_off).append(dt / per * 1e3)
            (h_on if fn is on else h_off).append(host)
            if out is not None:
                same = same and out == first_on
        if progress is not None and (i + 1) % every == 0 and i + 1 < pairs:
            progress(dict(record(toggle, name, unit, t_on, t_off, target, same, first_on, h_on, h_off), partial=True))
    return record(toggle, name, unit, t_on, t_off, target, same, first_on, h_on, h_off)


def save(out, toggle, records):
    """Writes OUT/overhead_ab-TOGGLE.json (nothing without --out or $OUT)."""
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"overhead_ab-{toggle}.json").write_text(json.dumps(records, indent=1))


def make_toggle(which):
    """The toggle, or (None, why) where its part is not in this process."""
    if which == "route":
        route = getattr(sys.modules.get("umscope_torch_route"), "ROUTE", None)  # place's sitecustomize made it
        if route is None:
            return None, ("no umscope route in this process: run it as `umscope place --kind device -- python3 "
                          "bench/overhead_ab.py --toggle route`")
        import torch
        torch.cuda.init()
        if not route.active():
            return None, "umscope's route is not active in this process"
        return RouteToggle(route), None
    if which == "tracer":
        if not os.environ.get("CUDA_INJECTION64_PATH"):
            return None, ("no umscope tracer in this process: run it as `umscope profile --um-trace -- python3 "
                          "bench/overhead_ab.py --toggle tracer`")
        import ctypes
        import torch
        torch.zeros(1, device="cuda")  # CUDA starts: the driver loads its injection, libumtrace
        path = loaded_libumtrace()
        if path is None:
            return None, f"CUDA did not load libumtrace (CUDA_INJECTION64_PATH={os.environ['CUDA_INJECTION64_PATH']})"
        lib = ctypes.CDLL(path)
        if lib.umtrace_attach() != 0:  # 0: attached already, as the injection left it
            return None, "libumtrace is not attached in this process (hardware counters or place --managed share it)"
        return TracerToggle(lib), None
    return SamplerToggle(), None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--toggle", default="route")
    p.add_argument("--work", default="llama,gpt2,train")  # or compiled, graph, ddp
    p.add_argument("--pairs", type=int, default=12)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", default=os.environ.get("OUT"))
    a = p.parse_args(argv)
    works = [w for w in a.work.split(",") if w]
    bad = [w for w in works if w not in WORKS]
    why = (f"unknown --toggle {a.toggle} ({', '.join(TARGETS)})" if a.toggle not in TARGETS else
           f"unknown work {','.join(bad)}" if bad else
           "--pairs needs at least 6 (the 95% interval)" if a.pairs < 6 else
           "--tokens and --steps need at least 1" if a.tokens < 1 or a.steps < 1 else
           "--work ddp runs on the ranks torchrun starts: torchrun --standalone --nproc_per_node 2 "
           "bench/overhead_ab.py --work ddp" if "ddp" in works and "LOCAL_RANK" not in os.environ else None)
    if why:
        print(f"overhead_ab: {why}", file=sys.stderr)
        return 2
    if "LOCAL_RANK" in os.environ:  # a rank torchrun started: its GPU before anything of CUDA starts
        import torch
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    lead = int(os.environ.get("RANK", "0")) == 0  # the rank that prints and writes (every rank measures)
    toggle, why = make_toggle(a.toggle)
    if toggle is None:
        print(f"overhead_ab: {why}", file=sys.stderr)
        return 2
    import torch
    target = TARGETS[a.toggle]
    records = []
    out = a.out if lead else None
    say = print if lead else (lambda *args, **kw: None)
    try:
        for w in works:
            work, per, unit = WORKS[w](a)
            about = dict(toggle=a.toggle, kind=os.environ.get("UMSCOPE_PLACE_KIND"), torch=torch.__version__,
                         gpu=torch.cuda.get_device_name(), records=os.environ.get("UMSCOPE_UMTRACE_RECORDS"),
                         nvtx_injection=os.environ.get("NVTX_INJECTION64_PATH"))
            cost = (lambda: {"toggle_cost": toggle.about()}) if hasattr(toggle, "about") else dict  # noqa: E731
            rec = measure(toggle, w, work, per, unit, a.pairs, target,
                          progress=lambda part: save(out, a.toggle, records + [dict(part, **about, **cost())]))
            rec.update(about, **cost())
            records.append(rec)
            ci = rec["ratio_ci95"]
            state = {True: "met", False: "MISSED", None: "not decided"}[rec["meets_target"]]
            say(f"{a.toggle} {w}: {toggle.on_name} {rec['median_on']:.3f} {unit}, {toggle.off_name} "
                f"{rec['median_off']:.3f} {unit}, ratio median {rec['ratio_median']:.4f} over {a.pairs} pairs, "
                f"95% interval {ci[0]:.4f}-{ci[1]:.4f}: {target} {state}; outputs equal: {rec['outputs_equal']}",
                flush=True)
            say("  pairs' ratios: " + " ".join(f"{x:.3f}" for x in rec["ratios"]), flush=True)
            if rec["cpu_ratio_ci95"]:
                lo, hi = rec["cpu_ratio_ci95"]
                say(f"  this thread's CPU time on / off: median {rec['cpu_ratio_median']:.4f}, 95% interval "
                    f"{lo:.4f}-{hi:.4f} (a diagnostic: the verdict is the wall time's)", flush=True)
            save(out, a.toggle, records)  # after each work: a call cut short keeps what it measured
            del work
            torch.cuda.empty_cache()
    finally:
        toggle.close()
        if "torch.distributed" in sys.modules and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    say("RESULT " + json.dumps(records))
    return 0


if __name__ == "__main__":
    import faulthandler
    faulthandler.enable()  # a crash inside a native part says where the program was
    sys.exit(main())
