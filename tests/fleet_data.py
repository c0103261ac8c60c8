"""Synthetic stores for the fleet tests (merge, compare, exports, API): records shaped as
umbench emits them, with made-up numbers (these tests check plumbing, not machines)."""

from umscope.store import Store
from umscope.suite import Case


def fingerprint(host, gpu="NVIDIA H100 80GB HBM3", job=None, n_gpus=1):
    fp = {"host": {"hostname": host, "kernel": "6.8"}, "cpu": {"model": "cpu"},
          "cuda": {"runtime_version": 13000, "driver": "580.1", "built_with_cuda": True},
          "gpus": [{"name": gpu, "pci_bus_id": f"0000:{i:02x}:00.0", "device": i} for i in range(n_gpus)],
          "umscope_version": "0.1.0"}
    if job:
        fp["scheduler"] = {"name": "slurm", "job": job, "vars": {"SLURM_JOB_ID": job}}
    return fp


def copy_rec(src, dst, bw, engine="ce", direction="uni", route="forward", size=256 << 20, dev=0, n=20, spread=0.01):
    return {"type": "record", "benchmark": "copy", "op": f"{engine}-copy",
            "processor": f"{'ce' if engine == 'ce' else 'gpu'}{dev}", "kind": src, "policy": "", "bytes": size,
            "metric": "bandwidth", "unit": "GB/s", "n": n, "median": bw, "min": bw * 0.99, "max": bw * 1.01,
            "value": bw, "spread": spread, "dst_kind": dst, "dst_policy": "", "direction": direction,
            "route": route, "verified": True, "bound": 64.0, "datapath": "h2d", "efficiency": round(bw / 64.0, 4),
            "samples": [bw] * n}


def stream_rec(op, kind, bw, size, threads=1, spread=0.02):
    return {"type": "record", "benchmark": "cpu-stream", "op": op, "processor": "cpu", "kind": kind, "policy": "",
            "bytes": size, "threads": threads, "metric": "bandwidth", "unit": "GB/s", "n": 5, "median": bw,
            "min": bw * 0.98, "max": bw * 1.02, "value": bw, "spread": spread, "verified": True, "samples": [bw] * 5}


def latency_rec(kind, ns):
    return {"type": "record", "benchmark": "latency", "op": "chase", "processor": "gpu0", "kind": kind, "policy": "",
            "bytes": 1 << 30, "metric": "latency", "unit": "ns", "n": 5, "median": ns, "min": ns, "max": ns,
            "value": ns, "spread": 0.01, "verified": True, "samples": [ns] * 5}


def make_store(path, host, n_records=200, scale=1.0, job=None, gpu="NVIDIA H100 80GB HBM3"):
    """One run of n_records bandwidth records (copy matrix + stream sweep) and its cases."""
    s = Store(path)
    run = s.create_run("bench bandwidth", f"umscope bench bandwidth ({host})", [], {}, fingerprint(host, gpu, job))
    recs = [copy_rec("pinned", "device", 55.0 * scale), copy_rec("device", "pinned", 52.0 * scale),
            copy_rec("pinned", "device", 50.0 * scale, direction="bidir", route="forward"),
            copy_rec("pinned", "device", 45.0 * scale, direction="bidir", route="reverse"),
            copy_rec("pinned", "device", 51.0 * scale, engine="sm"),
            copy_rec("device", "device", 1400.0 * scale),
            copy_rec("system", "device", 20.0 * scale),
            latency_rec("device", 600.0 / scale)]
    i = 0
    while len(recs) < n_records:
        recs.append(stream_rec(["read", "write", "copy"][i % 3], "system", 10.0 * scale + i % 7, 4096 << (i // 3 % 20),
                               threads=1 + i // 60))
        i += 1
    for k, rec in enumerate(recs[:n_records]):
        s.add_case_result(run, Case(rec["benchmark"], rec["kind"], {"i": str(k)}), "ok", "", 0, 0.1, [rec])
    s.add_case_result(run, Case("copy", "managed", {"dst": "device"}), "skipped", "no GPU", 0, 0.1, [])
    s.finish_run(run, "complete")
    s.close()
    return run
