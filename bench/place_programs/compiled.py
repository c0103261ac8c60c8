"""A torch.compile'd model (inductor, default mode): a small Transformer encoder trained with SGD; the first
steps compile (untimed), then the step time.

    python compiled.py [--steps 30] [--mode default|reduce-overhead]
"""
import argparse
import json
import time

import torch

from models import compiled_model, compiled_step

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--mode", default="default")
a = p.parse_args()

model, opt, step_fn = compiled_model(a.mode)
g = torch.Generator(device="cuda").manual_seed(3)
xs = torch.randn(a.steps, 16, 128, 512, device="cuda", generator=g)
ys = torch.randint(0, 16, (a.steps, 16, 128), device="cuda", generator=g)
losses, times, ends = [], [], []  # ends: the wall clock (epoch s) at each step's end
t_compile = time.perf_counter()
for i in range(a.steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = compiled_step(step_fn, opt, xs[i], ys[i])
    losses.append(loss.item())
    times.append(time.perf_counter() - t0)
    ends.append(time.time())
    if i == 2:
        print(f"compiled and warmed up in {time.perf_counter() - t_compile:.1f} s")
print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, {sorted(times[3:])[len(times[3:]) // 2] * 1e3:.2f} ms/step, "
      f"max allocated {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
print("RESULT " + json.dumps({"unit": "ms/step", "times_ms": [t * 1e3 for t in times[3:]], "ends_s": ends[3:],
                              "outputs": {"losses": losses},
                              "memory": {"max_memory_allocated": torch.cuda.max_memory_allocated()}}))
