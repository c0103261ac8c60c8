#!/usr/bin/env python3
"""What `umscope place` costs a PyTorch program per token or step, measured inside one placed process (issue 34).

Between two processes of the same launch-bound program the time per token moves by up to 1.3x on the H100 and
H200 (bench/place_compat.py's plain runs, docs/place.md), far more than issue 34's 2% target: a ratio of two
processes decides nothing about it. What place adds to a step is its route (place_site/umscope_torch_route.py:
every allocation goes to a pool whose segments libumalloc makes in the kind); the rest of what it does happens
once, at start-up. So this script runs under place, takes the route place installed (umscope_torch_route.ROUTE)
and times the same work routed and unrouted (Route.unrouted: PyTorch's own allocation path, as in a plain run),
in pairs whose order alternates (routed first, then unrouted first), after one warm-up of each. Each pair gives
the ratio routed / unrouted; the figure is the median ratio with its distribution-free 95% confidence interval
(order statistics of the pairs' ratios). Target 1.02: met where the interval's top is at or under it, missed
where its bottom is over it, else not decided.

Work (the models of bench/place_programs/, random weights, nothing downloaded):
  llama   greedy generation with transformers' Llama (generate.py llama), ms per token
  gpt2    the same with gpt2-medium's shape (generate.py gpt2), ms per token
  train   a step of train.py's loop: GPT-2 small, bf16 autocast, gradient checkpointing, AdamW, ms per step

    umscope place --kind device -- python3 bench/place_route_ab.py [--work llama,gpt2,train] [--pairs 12]
        [--tokens 64] [--steps 4] [--out DIR]

Prints one line per work and a JSON line (RESULT); with --out (or $OUT) writes place_route_ab.json. Exit 2 when
not run under `umscope place` with a PyTorch program's kind (no route to measure)."""
import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

TARGET = 1.02


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


def verdict(ci, target=TARGET):
    if ci is None:
        return None
    lo, hi = ci
    if hi <= target:
        return True
    if lo > target:
        return False
    return None


def time_it(fn):
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def generation(model_name, tokens):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    if model_name == "gpt2":
        config, cls = GPT2Config(n_layer=24, n_embd=1024, n_head=16), GPT2LMHeadModel
    else:
        config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=12, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=512)
        cls = LlamaForCausalLM
    with torch.device("cuda"):
        model = cls(config).to(torch.float16).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1)).cuda()

    def work():
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens,
                                 min_new_tokens=tokens, do_sample=False, pad_token_id=0)
        return out[0, prompt.shape[1]:].tolist()
    return work, tokens, "ms/token"


def training(steps):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_layer=8, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    x = torch.randint(0, config.vocab_size, (8, 256), generator=torch.Generator().manual_seed(2)).cuda()

    def work():
        for _ in range(steps):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return None  # each repetition trains on: its losses are not comparable between repetitions
    return work, steps, "ms/step"


def measure(route, name, work, per, unit, pairs):
    """Warm-up of each, then `pairs` pairs in alternating order; returns the work's record."""
    routed = lambda: time_it(work)  # noqa: E731
    unrouted = lambda: route.unrouted(time_it, work)  # noqa: E731
    first_r, first_u = routed()[1], unrouted()[1]
    t_r, t_u, same = [], [], first_r == first_u
    for i in range(pairs):
        order = (routed, unrouted) if i % 2 == 0 else (unrouted, routed)
        for fn in order:
            dt, out = fn()
            (t_r if fn is routed else t_u).append(dt / per * 1e3)
            if out is not None:
                same = same and out == first_r
    ratios = [r / u for r, u in zip(t_r, t_u)]
    med, ci = median_ci(ratios)
    return {"work": name, "unit": unit, "pairs": pairs, "routed": t_r, "unrouted": t_u,
            "routed_median": statistics.median(t_r), "unrouted_median": statistics.median(t_u),
            "ratios": ratios, "ratio_median": med, "ratio_ci95": ci, "target": TARGET,
            "meets_target": verdict(ci), "outputs_equal": same if first_r is not None else None}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default="llama,gpt2,train")
    p.add_argument("--pairs", type=int, default=12)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", default=os.environ.get("OUT"))
    a = p.parse_args(argv)
    works = [w for w in a.work.split(",") if w]
    bad = [w for w in works if w not in ("llama", "gpt2", "train")]
    if bad or a.pairs < 6 or a.tokens < 1 or a.steps < 1:
        print(f"place_route_ab: {'unknown work ' + ','.join(bad) if bad else '--pairs needs at least 6 (the 95% interval), --tokens and --steps at least 1'}",
              file=sys.stderr)
        return 2
    refusal = ("place_route_ab: no umscope route in this process: run it as "
               "`umscope place --kind device -- python3 bench/place_route_ab.py`")
    route = getattr(sys.modules.get("umscope_torch_route"), "ROUTE", None)  # place's sitecustomize imported it
    if route is None:
        print(refusal, file=sys.stderr)
        return 2
    import torch
    torch.cuda.init()
    if not route.active():
        print(refusal, file=sys.stderr)
        return 2
    records = []
    for w in works:
        work, per, unit = generation(w, a.tokens) if w in ("llama", "gpt2") else training(a.steps)
        rec = measure(route, w, work, per, unit, a.pairs)
        rec.update(kind=os.environ.get("UMSCOPE_PLACE_KIND"), rules=os.environ.get("UMSCOPE_PLACE_RULES"),
                   torch=torch.__version__, gpu=torch.cuda.get_device_name())
        records.append(rec)
        ci = rec["ratio_ci95"]
        state = {True: "met", False: "MISSED", None: "not decided"}[rec["meets_target"]]
        print(f"{w}: routed {rec['routed_median']:.3f} {unit}, unrouted {rec['unrouted_median']:.3f} {unit}, "
              f"routed/unrouted median {rec['ratio_median']:.4f} over {a.pairs} pairs, 95% interval "
              f"{ci[0]:.4f}-{ci[1]:.4f}: target {TARGET} {state}; outputs equal: {rec['outputs_equal']}", flush=True)
        del work
        torch.cuda.empty_cache()
    print("RESULT " + json.dumps(records))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "place_route_ab.json").write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
