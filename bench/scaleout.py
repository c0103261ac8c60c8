#!/usr/bin/env python3
"""Scale-out figures the scale-out issue asks for, measured in one run on a
node with two GPUs (nvidia-h200-x2). Not a test: it prints what it measured.

    python3 bench/scaleout.py [--size 1G] [--reps 20]

1. NCCL all-reduce and all-gather bus bandwidth at 1 GiB with device buffers:
   umscope's nccl family (one process, ncclCommInitAll) against PyTorch's
   torch.distributed (NCCL backend, 2 processes), both with NCCL_NVLS_ENABLE=0
   and the same libnccl where the nvidia-nccl-cu13 wheel is installed; the
   target is a ratio >= 0.98. Both time one call per sample with CUDA events
   and take the slower rank; busbw by nccl-tests' definitions.
2. The NVLink bound of the pair: links x per-link rate from NVML (and the
   probe's peer-link bound where the probe provides one).
3. The mpi family with 2 ranks (one per GPU) under mpirun on device, pinned
   and managed buffers, or the reason the machine's MPI cannot."""
import argparse
import os
import statistics
import sys
import tempfile

from umscope import native, probe, scaleout
from umscope.suite import execute

TARGET = 0.98


def umscope_nccl(size, reps):
    recs, status = native.run_case("nccl", "--kind", "device", "--op", "allreduce,allgather", "--bytes", size,
                                   "--reps", str(reps), "--warmup", "5", timeout=600)
    if status["status"] != "ok":
        sys.exit(f"umscope nccl: {status['status']}: {status.get('reason')}")
    return {r["op"]: r for r in recs}


def _torch_rank(rank, world, init_file, size_bytes, reps, out_file):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    count = size_bytes // 4
    results = {}
    for op in ("allreduce", "allgather"):
        if op == "allreduce":
            src = torch.full((count,), float(rank + 1), device="cuda")
            dst = src.clone()  # all_reduce is in place: a fresh copy each call would add a copy to the time
            call = lambda: dist.all_reduce(dst)  # noqa: E731
            factor = 2 * (world - 1) / world
        else:
            per = count // world
            src = torch.full((per,), float(rank + 1), device="cuda")
            dst = torch.empty(per * world, device="cuda")
            call = lambda: dist.all_gather_into_tensor(dst, src)  # noqa: E731
            factor = (world - 1) / world
        used = (count if op == "allreduce" else (count // world) * world) * 4
        stream = torch.cuda.current_stream()
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            call()
            b.record(stream)
            b.synchronize()
            times.append(a.elapsed_time(b))
        t = torch.tensor(times, device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # per sample, the slower rank's time
        # Check the result as umscope does: all-reduce sums ranks (after 5 + reps in-place calls it
        # grows; check all-gather, whose output is fixed).
        if op == "allgather":
            want = torch.cat([torch.full((count // world,), float(r + 1), device="cuda") for r in range(world)])
            assert torch.equal(dst, want), "torch all_gather result differs"
        busbw = [used / (ms * 1e-3) / 1e9 * factor for ms in t.tolist()]
        results[op] = (statistics.median(busbw), min(busbw), max(busbw), used)
    if rank == 0:
        import json
        with open(out_file, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def torch_nccl(size_bytes, reps):
    import json
    import torch
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(_torch_rank, args=(2, os.path.join(d, "init"), size_bytes, reps, out), nprocs=2, join=True)
        with open(out) as f:
            res = json.load(f)
    return res, torch.__version__, ".".join(map(str, torch.cuda.nccl.version()))


def nvlink_bound(fp):
    lines = []
    try:
        from umscope.model import bounds
        pl = getattr(bounds, "peer_link", None)
        if pl:
            b = pl(fp, 0, 1)
            if b:
                lines.append(f"{b[0]:g} GB/s per direction ({b[1]})")
    except Exception as e:  # the probe's bound is optional here
        lines.append(f"probe bound unavailable: {e}")
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        active = 0
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                active += pynvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED
            except pynvml.NVMLError:
                break
        field = getattr(pynvml, "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON", None)
        rate = None
        if field is not None:
            v = pynvml.nvmlDeviceGetFieldValues(h, [field])[0]
            if v.nvmlReturn == 0:
                rate = v.value.uiVal / 1000.0  # MB/s -> GB/s per link
        if active and rate:
            lines.append(f"{active * rate:.1f} GB/s per direction (NVML: {active} active links x {rate:.3f} GB/s "
                         "link speed)")
        elif active:
            lines.append(f"{active} active NVLinks (NVML gave no link speed)")
        pynvml.nvmlShutdown()
    except Exception as e:
        lines.append(f"NVML unavailable: {e}")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GiB", help="collective size, nccl-tests' definition (default 1 GiB)")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    fp = probe.probe_gpu()
    if len(fp["gpus"]) < 2:
        sys.exit(f"needs two GPUs; this machine has {len(fp['gpus'])}")
    os.environ["NCCL_NVLS_ENABLE"] = os.environ.get("NCCL_NVLS_ENABLE", "0")
    if os.environ["NCCL_NVLS_ENABLE"] != "0":
        sys.exit("NCCL_NVLS_ENABLE must be 0 here (no multicast on shared machines)")
    scaleout._prepare_env()  # the same libnccl as PyTorch's where the wheel is installed
    from umscope.sizes import parse_size_list
    size = parse_size_list(a.size)[0]

    ours = umscope_nccl(str(size), a.reps)
    theirs, torch_version, torch_nccl_version = torch_nccl(size, a.reps)
    first = next(iter(ours.values()))
    print(f"\n{fp['gpus'][0]['name']} x{len(fp['gpus'])}; umscope NCCL {first['nccl_version']} "
          f"({first['nccl_library']}); torch {torch_version} NCCL {torch_nccl_version}; "
          f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}")
    print(f"{'collective (device buffers)':<30} {'umscope busbw':>14} {'torch busbw':>12} {'ratio':>6}  target")
    for op in ("allreduce", "allgather"):
        r, (tm, tmin, tmax, used) = ours[op], theirs[op]
        ratio = r["median"] / tm
        print(f"{op + ' ' + str(r['bytes'] >> 20) + ' MiB':<30} {r['median']:>9.1f} GB/s {tm:>7.1f} GB/s "
              f"{ratio:>6.3f}  >= {TARGET} {'met' if ratio >= TARGET else 'NOT met'}")
        print(f"{'':<30} umscope min-max {r['min']:.1f}-{r['max']:.1f}, spread {100 * r['spread']:.1f}%, "
              f"algbw {r['algbw']:.1f} GB/s, verified {r['verified']}; torch min-max {tmin:.1f}-{tmax:.1f}")
    for line in nvlink_bound(fp):
        print(f"NVLink bound: {line}")

    print("\nmpi family, 2 ranks under mpirun (one per GPU), 8 B / 1 MiB / 64 MiB:")
    for kind in ("device", "pinned", "managed"):
        (case,) = scaleout.mpi_cases(fp, [kind], "8,1MiB,64MiB", "bw,bibw,latency", launcher="mpirun", ranks=2)
        out = execute(case, {"reps": 5, "warmup": 1})
        if out.status != "ok":
            print(f"  {kind:<8} {out.status}: {out.reason}")
            continue
        for r in out.records:
            print(f"  {kind:<8} {r['op']:<8} {r['bytes']:>9} B  {r['median']:>10.4g} {r['unit']:<5} "
                  f"(min {r['min']:.4g}, max {r['max']:.4g}; {r['pointers']} pointers, verified {r['verified']})")
    print(f"  launcher: {case.params['launcher']}")


if __name__ == "__main__":
    main()
