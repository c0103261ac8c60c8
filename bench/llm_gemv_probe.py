"""h20 probe: batch-1 matrix-vector products reading their weights from pinned host memory (libumalloc
pinned pool, as the llm app's mixed mode): cuBLAS paths vs the app's Triton split-K GEMV (apps/llm_gemv.py) at
several tile shapes, GB/s = weight bytes / time (CUDA events, median of 20 after 3 warm-ups). GPT-2 XL shapes
(Conv1D: W [K, N], y = x W + b) and its tied LM head (Linear layout)."""
import json
import os
import sys
import time

import torch
import triton

from umscope import place
from umscope.apps.llm_gemv import kernel

OUT = os.environ.get("O", "/tmp")
res = []


def emit(**kw):
    res.append(kw)
    print(json.dumps(kw), flush=True)


def timeit(f, reps=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        f()
        ev[i + 1].record()
    torch.cuda.synchronize()
    t = sorted(ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(reps))
    return t[len(t) // 2], (t[-1] - t[0]) / t[len(t) // 2]


def main():
    t_start = time.time()
    gemv_kernel = kernel()  # the llm application's own kernel, at the tile shapes swept below
    lib = place.library_path()
    place.configure("pinned,first_touch=none", "", 0, lib)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free").allocator()
    hpool = torch.cuda.MemPool(alloc)
    dev = "cuda:0"
    shapes = [("c_attn", 1600, 4800, "conv1d"), ("c_fc", 1600, 6400, "conv1d"), ("mlp.c_proj", 6400, 1600, "conv1d"),
              ("attn.c_proj", 1600, 1600, "conv1d"), ("lm_head", 1600, 50257, "linear")]
    for dt in (torch.float16, torch.float32):
        for name, K, N, layout in shapes:
            if time.time() - t_start > float(os.environ.get('GEMV_BUDGET', '30')):
                break
            torch.manual_seed(0)
            with torch.cuda.use_mem_pool(hpool):
                W = (torch.randn(K, N, device=dev, dtype=dt) * 0.02) if layout == "conv1d" else \
                    (torch.randn(N, K, device=dev, dtype=dt) * 0.02)
                b = torch.randn(N, device=dev, dtype=dt) * 0.02
            x = torch.randn(1, K, device=dev, dtype=dt)
            nbytes = W.numel() * W.element_size()
            if layout == "conv1d":
                ref = torch.addmm(b, x, W).float()
                paths = {"cublas addmm(b, x, W)": lambda: torch.addmm(b, x, W),
                         "cublas mm(x, W)": lambda: torch.mm(x, W),
                         "cublas mv(W^T, x)": lambda: torch.mv(W.t(), x[0])}
                swk, swn = W.stride(0), W.stride(1)
            else:
                ref = torch.nn.functional.linear(x, W).float()
                paths = {"cublas linear(x, W)": lambda: torch.nn.functional.linear(x, W),
                         "cublas mv(W, x)": lambda: torch.mv(W, x[0])}
                swk, swn = W.stride(1), W.stride(0)
            for pname, f in paths.items():
                for blas in (["cublas", "cublaslt"] if "addmm" in pname or "linear" in pname else [None]):
                    try:
                        if blas:
                            torch.backends.cuda.preferred_blas_library(blas)
                        med, sp = timeit(f)
                        emit(shape=name, K=K, N=N, dtype=str(dt), path=pname + (f" [{blas}]" if blas else ""),
                             s=med, spread=sp, gbps=nbytes / med / 1e9)
                    except Exception as e:  # noqa: BLE001
                        emit(shape=name, dtype=str(dt), path=pname, error=str(e)[:200])
            torch.backends.cuda.preferred_blas_library("cublas")
            y = torch.zeros(N, device=dev, dtype=torch.float32)
            cfgs = [(16, 256, 8, 4), (32, 128, 8, 4), (32, 256, 16, 8), (64, 128, 16, 8), (16, 128, 16, 4)] \
                if layout == "conv1d" else [(128, 16, 1, 4), (256, 16, 1, 4), (128, 32, 1, 4), (64, 32, 2, 4)]
            for bk, bn, split, warps in cfgs:
                if dt == torch.float32 and bk * bn > 8192:
                    continue
                grid = (triton.cdiv(N, bn), split)
                try:
                    y.zero_()
                    gemv_kernel[grid](x, W, y, y, K, N, swk, swn, BLOCK_K=bk, BLOCK_N=bn, SPLIT_K=split,
                                      HAS_BIAS=False, num_warps=warps)
                    torch.cuda.synchronize()
                    err = float((y + (b.float() if layout == "conv1d" else 0) - ref[0]).abs().max() /
                                ref.abs().max())
                    med, sp = timeit(lambda: gemv_kernel[grid](x, W, y, y, K, N, swk, swn, BLOCK_K=bk, BLOCK_N=bn,
                                                               SPLIT_K=split, HAS_BIAS=False, num_warps=warps))
                    emit(shape=name, K=K, N=N, dtype=str(dt), path=f"triton bk{bk} bn{bn} split{split} w{warps}",
                         grid=list(grid), s=med, spread=sp, gbps=nbytes / med / 1e9, rel_err_vs_cublas=err)
                except Exception as e:  # noqa: BLE001
                    emit(shape=name, dtype=str(dt), path=f"triton bk{bk} bn{bn} split{split} w{warps}",
                         error=str(e)[:300])
            del W, b
    with open(os.path.join(OUT, "gemv.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    sys.exit(main())
