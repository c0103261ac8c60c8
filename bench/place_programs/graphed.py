"""A whole training step captured as a CUDA graph and replayed (the recipe of PyTorch's CUDA-graph notes):
warm-up on a side stream, capture forward, backward and the optimizer step, then replay with new data copied
into the static inputs.

    python graphed.py [--steps 200]
"""
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
a = p.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                            torch.nn.GELU(), torch.nn.Linear(4096, 10)).cuda()
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = torch.Generator(device="cuda").manual_seed(4)
xs = torch.randn(a.steps, 256, 1024, device="cuda", generator=g)
ys = torch.randint(0, 10, (a.steps, 256), device="cuda", generator=g)
static_x, static_y = xs[0].clone(), ys[0].clone()

s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(static_x), static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(s)

graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = loss_fn(model(static_x), static_y)
    static_loss.backward()
    opt.step()

losses = torch.empty(a.steps, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(a.steps):
    static_x.copy_(xs[i])
    static_y.copy_(ys[i])
    graph.replay()
    losses[i] = static_loss
torch.cuda.synchronize()
step = (time.perf_counter() - t0) / a.steps
losses = losses.tolist()
print(f"{a.steps} replays, {step * 1e3:.3f} ms/step, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
print("RESULT " + json.dumps({"unit": "ms/step", "times_ms": [step * 1e3], "outputs": {"losses": losses},
                              "memory": {"max_memory_allocated": torch.cuda.max_memory_allocated()}}))
