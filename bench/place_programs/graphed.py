"""A whole training step captured as a CUDA graph and replayed (the recipe of PyTorch's CUDA-graph notes):
warm-up on a side stream, capture forward, backward and the optimizer step, then replay with new data copied
into the static inputs (the model and its capture: models.graphed_model).

    python graphed.py [--steps 200]
"""
import argparse
import json
import time

import torch
from models import graphed_inputs, graphed_model, graphed_step

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
a = p.parse_args()

xs, ys, static_x, static_y = graphed_inputs(a.steps)
graph, static_loss = graphed_model(static_x, static_y)

losses = torch.empty(a.steps, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(a.steps):
    graphed_step(graph, static_x, static_y, xs[i], ys[i])
    losses[i] = static_loss
torch.cuda.synchronize()
step = (time.perf_counter() - t0) / a.steps
losses = losses.tolist()
print(f"{a.steps} replays, {step * 1e3:.3f} ms/step, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
print("RESULT " + json.dumps({"unit": "ms/step", "times_ms": [step * 1e3], "outputs": {"losses": losses},
                              "memory": {"max_memory_allocated": torch.cuda.max_memory_allocated()}}))
