"""DistributedDataParallel training on the GPUs of one node, started by torchrun:

    torchrun --standalone --nproc_per_node 2 ddp.py [--steps 30]
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
a = p.parse_args()

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
ddp = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
g = torch.Generator(device="cuda").manual_seed(10 + rank)
losses, times = [], []
segments_at = {}
for step in range(a.steps):
    if step == 5:  # the steps timed below start here
        segments_at["timed"] = torch.cuda.memory_stats().get("num_device_alloc", 0)
    x = torch.randn(64, 1024, device="cuda", generator=g)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = (ddp(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    lt = loss.detach().clone()
    dist.all_reduce(lt)
    losses.append(lt.item() / dist.get_world_size())
if rank == 0:
    print(f"{dist.get_world_size()} ranks, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"{sorted(times[5:])[len(times[5:]) // 2] * 1e3:.2f} ms/step")
    print("RESULT " + json.dumps({"unit": "ms/step", "times_ms": [t * 1e3 for t in times[5:]],
                                  "outputs": {"losses": losses},
                                  "memory": {"max_memory_allocated": torch.cuda.max_memory_allocated(),
                                             "memory_reserved": torch.cuda.memory_reserved(),
                                             "segments_made_while_timed": torch.cuda.memory_stats().get(
                                                 "num_device_alloc", 0) - segments_at.get("timed", 0)}}))
dist.destroy_process_group()
