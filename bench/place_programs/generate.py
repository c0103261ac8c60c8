"""Greedy generation with a transformers causal LM built from its configuration (random weights, nothing
downloaded): gpt2 (gpt2-medium's shape) or llama (a small Llama). Prints the new tokens, the time per token
and PyTorch's memory statistics, as a user's script would.

    python generate.py gpt2|llama [--tokens 64] [--reps 7]
"""
import argparse
import json
import statistics
import time

import torch

from models import generation_model, generation_prompt

p = argparse.ArgumentParser()
p.add_argument("model", choices=["gpt2", "llama"])
p.add_argument("--tokens", type=int, default=64)
p.add_argument("--reps", type=int, default=7)
a = p.parse_args()

config, model = generation_model(a.model)
prompt = generation_prompt(config)


def generate(n):
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, pad_token_id=0)


with torch.inference_mode():
    # warm-up: a whole generation of the timed length (a shorter one left the first timed generation 5x slower
    # on the H100: the longer cache's shapes met their kernels and allocations for the first time there)
    generate(a.tokens)
    torch.cuda.reset_peak_memory_stats()
    segments_before = torch.cuda.memory_stats().get("num_device_alloc", 0)
    per_token, ends = [], []  # ends: the wall clock (epoch s) at each timed generation's end
    for _ in range(a.reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = generate(a.tokens)
        torch.cuda.synchronize()
        per_token.append((time.perf_counter() - t0) / a.tokens)
        ends.append(time.time())
segments_timed = torch.cuda.memory_stats().get("num_device_alloc", 0) - segments_before
tokens = out[0, prompt.shape[1]:].tolist()
peak = torch.cuda.max_memory_allocated()
print(f"{a.model}: {a.tokens} tokens, {statistics.median(per_token) * 1e3:.2f} ms/token, "
      f"peak {peak / 2**20:.0f} MiB allocated, {torch.cuda.memory_reserved() / 2**20:.0f} MiB reserved")
print("RESULT " + json.dumps({"unit": "ms/token", "times_ms": [t * 1e3 for t in per_token], "ends_s": ends,
                              "outputs": {"tokens": tokens},
                              "memory": {"max_memory_allocated": peak,
                                         "memory_reserved": torch.cuda.memory_reserved(),
                                         "allocated_bytes.all.peak": torch.cuda.memory_stats()["allocated_bytes.all.peak"],
                                         "segments_made_while_timed": segments_timed}}))
