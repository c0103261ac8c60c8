#!/usr/bin/env python3
"""Unified-memory figures the UM-dynamics issue asks to check, measured in
one run on the GPU node. Not a test: it prints what it measured.

    python3 bench/um.py [--device 0] [--size 4G] [--available 8G] [--fault-bytes 1G]

Migration of CPU-initialised managed memory over iterations, with and without
prefetch (and the prefetch's own rate); GPU first touch against CPU first
touch plus migration; fault cost per page; oversubscription up to 0.9 (never
above 1 here); interleaved CPU and GPU writes."""
import argparse
import sys

from umscope import native, probe


def umbench(bench, *args):
    records, status = native.run_case(bench, *args, timeout=900)
    if status.get("status") != "ok":
        print(f"  umbench {bench} {' '.join(args)}: {status.get('status')}: {status.get('reason')}")
    return records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="0")
    ap.add_argument("--size", default="4G")
    ap.add_argument("--available", default="8G")
    ap.add_argument("--fault-bytes", default="1G", help="memory touched by the fault-cost cases (default 1G)")
    a = ap.parse_args()
    fp = probe.probe_gpu()
    g = probe.select_gpu(fp, int(a.device)) or sys.exit(f"no GPU {a.device}")
    print(f"{g['name']}, {g['free_mem'] / 2**30:.1f} GiB free; addressing {g['addressing']}")
    dev = ["--device", a.device]

    print(f"\nmigration: GPU read of {a.size}, 20 iterations (GB/s)")
    for kind in ("device", "managed,first_touch=cpu", "managed,first_touch=gpu", "managed,first_touch=cpu,prefetch=gpu",
                 "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
                 "managed,first_touch=cpu,advise=accessed_by:gpu", "pinned", "registered", "system"):
        for r in umbench("migration", "--kind", kind, "--bytes", a.size, "--iterations", "20", *dev):
            it = ", ".join(f"{v:.0f}" for v in r["samples"][:4])
            pf = f"; prefetch {r['prefetch_gbps']:.1f} GB/s ({r['prefetch_ms']:.0f} ms)" if "prefetch_gbps" in r else ""
            print(f"  {kind:<62} first {r['first']:>8.1f}  steady {r['steady']:>8.1f}  [{it}, ...]{pf}")

    print(f"\nfirst touch of {a.size} (ms, median of 3)")
    ft = {}
    for kind, by in (("managed", "gpu"), ("managed", "cpu"), ("system", "cpu"), ("system,page=thp", "cpu"),
                     ("pinned", "cpu"), ("registered", "cpu"), ("device", "gpu"), ("system", "gpu")):
        recs = {r["op"]: r for r in umbench("firsttouch", "--kind", kind, "--by", by, "--bytes", a.size,
                                            "--reps", "3", *dev)}
        if recs:
            ft[(kind, by)] = recs
            print(f"  {kind:<18} by {by}: alloc {recs['alloc']['median']:>8.1f}  first touch "
                  f"{recs['first-touch']['median']:>8.1f}  second {recs['second-touch']['median']:>8.1f}  "
                  f"free {recs['free']['median']:>8.1f}")
    mig = umbench("migration", "--kind", "managed,first_touch=cpu", "--op", "write", "--bytes", a.size,
                  "--iterations", "2", *dev)
    if ("managed", "gpu") in ft and ("managed", "cpu") in ft and mig:
        gpu_init = ft[("managed", "gpu")]["first-touch"]["median"]
        first_pass_ms = mig[0]["bytes"] / (mig[0]["first"] * 1e9) * 1e3
        cpu_path = ft[("managed", "cpu")]["first-touch"]["median"] + first_pass_ms
        print(f"  managed initialised by the GPU: {gpu_init:.1f} ms; by the CPU then migrated by the GPU's first "
              f"write: {cpu_path:.1f} ms ({cpu_path / gpu_init:.1f}x)")

    print(f"\nfaults: one touch per stride of {a.fault_bytes} the other processor placed (us per page)")
    for kind, proc in (("managed,first_touch=cpu", "gpu"), ("managed,first_touch=gpu", "cpu"),
                       ("system,first_touch=none", "cpu")):
        for mode in ("serial", "parallel"):
            for r in umbench("faults", "--kind", kind, "--processor", proc, "--mode", mode, "--bytes", a.fault_bytes,
                             "--stride", "4K,64K,2M", "--reps", "3", *dev):
                print(f"  {proc} touches {kind:<26} {mode:<8} stride {r['stride'] >> 10:>5} KiB: "
                      f"{r['median']:>9.3f} us/page  ({r['pages_per_s']:.0f} pages/s, {r['pages']} pages)")

    print(f"\noversubscription: footprint = DOS x {a.available} left free by a ballast (GB/s)")
    for kind in ("managed,first_touch=cpu", "managed,first_touch=gpu"):
        for dos in ("0.25", "0.5", "0.75", "0.9"):
            for r in umbench("migration", "--kind", kind, "--dos", dos, "--available", a.available,
                             "--iterations", "5", *dev):
                print(f"  {kind:<26} DOS {dos:>4}: {r['bytes'] / 2**30:5.2f} GiB, ballast {r['ballast'] / 2**30:6.1f}"
                      f" GiB, first {r['first']:>8.1f}, steady {r['steady']:>8.1f}")

    print("\ninterleaved writes: the CPU writes 256 MiB, then the GPU N times (ms per GPU write)")
    for kind in ("managed,first_touch=cpu", "pinned"):
        for w in ("full", "stride"):
            recs = umbench("interleave", "--kind", kind, "--bytes", "256M", "--cpu-write", w,
                           "--n", "1,4,16,64,256", *dev)
            print(f"  {kind:<26} CPU {w:<6}: " + ", ".join(f"N={r['gpu_writes']}: {r['median']:.3f}" for r in recs))


if __name__ == "__main__":
    main()
