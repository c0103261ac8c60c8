"""A training loop as people write it: a small GPT-2 language model with gradient checkpointing, AdamW, bf16
autocast, batches from a pin_memory DataLoader copied ahead on a side stream; logs PyTorch's memory statistics
each step and prints the memory summary at the end.

    python train.py [--steps 24]
"""
import argparse
import json
import statistics
import time

import torch

from models import train_step, training_model

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=24)
a = p.parse_args()

config, model, opt = training_model()

data = torch.randint(0, config.vocab_size, (a.steps * 8, 256), generator=torch.Generator().manual_seed(2))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=8, num_workers=2,
                                     pin_memory=True)
copy_stream = torch.cuda.Stream()


def to_gpu(batch):
    with torch.cuda.stream(copy_stream):
        x = batch[0].cuda(non_blocking=True)
    return x


losses, times, mem, ends = [], [], [], []  # ends: the wall clock (epoch s) at each step's end
it = iter(loader)
nxt = to_gpu(next(it))
for step in range(a.steps):
    torch.cuda.current_stream().wait_stream(copy_stream)
    x = nxt
    x.record_stream(torch.cuda.current_stream())
    if step + 1 < a.steps:
        nxt = to_gpu(next(it))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda.reset_peak_memory_stats()
    loss = train_step(model, opt, x)
    losses.append(loss.item())
    times.append(time.perf_counter() - t0)
    ends.append(time.time())
    mem.append({"allocated": torch.cuda.memory_allocated(), "max_allocated": torch.cuda.max_memory_allocated(),
                "reserved": torch.cuda.memory_reserved()})
    if step % 8 == 0:
        print(f"step {step}: loss {losses[-1]:.4f}, {times[-1] * 1e3:.1f} ms, "
              f"max allocated {mem[-1]['max_allocated'] / 2**20:.0f} MiB, reserved {mem[-1]['reserved'] / 2**20:.0f} MiB")
summary = torch.cuda.memory_summary()
print("\n".join(summary.splitlines()[:12]))
stats = torch.cuda.memory_stats()
torch.cuda.empty_cache()
free, total = torch.cuda.mem_get_info()
print("RESULT " + json.dumps({"unit": "ms/step", "times_ms": [t * 1e3 for t in times[4:]], "ends_s": ends[4:],
                              "outputs": {"losses": losses},
                              "memory": {"max_memory_allocated": max(m["max_allocated"] for m in mem),
                                         "memory_reserved_first_last": [mem[0]["reserved"], mem[-1]["reserved"]],
                                         "num_alloc_retries": stats["num_alloc_retries"],
                                         "reserved_after_empty_cache": torch.cuda.memory_reserved(),
                                         "summary_lines": len(summary.splitlines())}}))
