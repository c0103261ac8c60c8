#!/usr/bin/env python3
"""Latency figures the latency issue asks for, measured in one run on the GPU
node and printed beside the reference values other tools report for the same
GPU (labelled as such: they are not measurements of this run).

    python3 bench/latency.py [--device 0] [--reps 7] [--exchanges 10000] [--increments 100000]

GPU chase: L2 hits and device memory beyond L2 (ns and cycles); host-device
latency (the GPU chasing pinned, registered and host-kept managed memory);
the CPU chasing system memory; ping-pong round trips of every pair."""
import argparse
import sys

from umscope import native, probe

# Reference values other tools reported for one GPU (quoted in the latency issue for an H100 80GB HBM3 on a
# PCIe Gen5 host); not measured here, and printed only where the GPU under test is that GPU.
REFERENCE_GPU = "H100"
REFERENCE = {"host-device latency (nvbandwidth host_device_latency_sm, H100 80GB HBM3, PCIe Gen5)": "about 1190 ns",
             "L2 hit (gpu-benches, H100)": "about 277 cycles"}


def umbench(bench, *args):
    return native.run_case(bench, *args, timeout=900)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="0")
    ap.add_argument("--reps", default="7", help="timed repetitions per measurement (default 7)")
    ap.add_argument("--exchanges", default="10000", help="ping-pong exchanges per repetition (default 10000)")
    ap.add_argument("--increments", default="100000",
                    help="ping-pong coherence check: concurrent increments per agent (default 100000)")
    a = ap.parse_args()
    fp = probe.probe_gpu()
    g = probe.select_gpu(fp, int(a.device)) or sys.exit(f"no GPU {a.device}")
    dev = ["--device", a.device, "--reps", a.reps, "--warmup", "0"]
    print(f"{g['name']}: L2 {g['l2_bytes'] >> 20} MiB, {g['sms']} SMs")
    print(f"{'chase (one thread, random cycle, 128 B slots)':<58} {'footprint':>9} {'median ns':>10} "
          f"{'min':>8} {'max':>8} {'spread':>7} {'cycles':>7}")
    rows = [("gpu", "device", "4K,16M,1G,4G"), ("gpu", "pinned", "4M,1G"), ("gpu", "registered", "1G"),
            ("gpu", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu", "1G"),
            ("gpu", "managed,first_touch=cpu,prefetch=gpu", "1G"), ("cpu", "system", "4K,1M,1G"),
            ("cpu", "managed,first_touch=gpu", "64M")]
    for proc, kind, sizes in rows:
        recs, status = umbench("latency", "--processor", proc, "--kind", kind, "--bytes", sizes, *dev)
        if status["status"] != "ok":
            print(f"{proc} {kind}: {status['status']}: {status.get('reason')}")
        for r in recs:
            if r["op"] == "timer":
                print(f"  GPU clock against the global timer: {r['median']:.0f} MHz (device attribute "
                      f"{r['clock_rate_attr_mhz']:.0f} MHz), global timer step {r['globaltimer_step_ns']} ns")
                continue
            cyc = f"{r['cycles']:.0f}" if "cycles" in r else ""
            print(f"{proc + ' -> ' + kind:<58} {r['bytes'] >> 10:>7}Ki {r['median']:>10.1f} {r['min']:>8.1f} "
                  f"{r['max']:>8.1f} {100 * r['spread']:>6.1f}% {cyc:>7}")
    print(f"\nping-pong round trip (system-scope CAS, {a.exchanges} exchanges per repetition)")
    for pair, kinds in (("cpu-gpu", ["pinned", "registered", "managed", "system"]),
                        ("gpu-gpu", ["device", "pinned", "registered", "managed"]),
                        ("cpu-cpu", ["system", "pinned", "managed"])):
        for kind in kinds:
            recs, status = umbench("pingpong", "--pair", pair, "--kind", kind, "--device", a.device, "--reps", a.reps,
                                   "--exchanges", a.exchanges, "--increments", a.increments)
            if status["status"] != "ok":
                print(f"  {pair:<8} {kind:<11} {status['status']}: {status.get('reason')}")
                continue
            r = recs[0]
            print(f"  {pair:<8} {kind:<11} {r['median']:>9.1f} ns  (min {r['min']:.1f}, max {r['max']:.1f}, "
                  f"spread {100 * r['spread']:.1f}%; {r['atomics_check']})")
    if REFERENCE_GPU in g["name"]:
        print(f"\nreference values other tools reported for an {REFERENCE_GPU} (quoted, not measured in this run):")
        for k, v in REFERENCE.items():
            print(f"  {k}: {v}")
    else:
        print(f"\n(the reference values this script knows are for an {REFERENCE_GPU}; this GPU is {g['name']}: "
              "none shown)")


if __name__ == "__main__":
    main()
