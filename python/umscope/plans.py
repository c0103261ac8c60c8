"""Which cases a command runs. The default plan (`umscope run`) is a short
characterisation of the node; each benchmark family can also run alone
(`umscope bench NAME`). Plans are built from the probe, so kinds the machine
cannot serve still appear: they are recorded as skipped, with the reason."""

import os
from dataclasses import dataclass
from typing import Callable

from umscope import native, scaleout
from umscope.native import validate_kind  # noqa: F401 (plans.validate_kind: validate.py, tests)
from umscope.errors import UsageError
from umscope.sizes import parse_size_list, size_arg  # noqa: F401 (plans.size_arg: validate.py, tests)
from umscope.suite import Case

# Kinds and policies the GPU side is measured over: each is one way a program
# can put its data, so each is worth a row in the report.
GPU_KINDS = [
    "device",
    "managed,first_touch=gpu",
    "managed,first_touch=cpu",
    "managed,first_touch=cpu,prefetch=gpu",
    "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
    "pinned",
    "registered",
    "system",
]
CPU_KINDS = [
    "system",
    "pinned",
    "registered",
    "managed,first_touch=cpu",
    "managed,first_touch=gpu",
]


def numa_kinds(fingerprint) -> list:
    """numa:N for each NUMA node with memory, where there are two or more: on a host with one node, numa:0
    is the system memory the 'system' kind already measures (same pages, same node), so it adds no row."""
    nodes = [f"numa:{n['id']}" for n in fingerprint.get("numa", []) if n.get("mem_bytes")]
    return nodes if len(nodes) > 1 else []


def peer_kinds(fingerprint, device=None) -> list:
    """Device memory of every other GPU (peer:N), reached from the GPU under test over the peer link."""
    device = fingerprint.get("device", 0) if device is None else device
    return [f"peer:{g['device']}" for g in fingerprint.get("gpus") or [] if g.get("device", 0) != device]


def gpu_pairs(fingerprint) -> list:
    """Every ordered pair (a, b) of distinct GPUs: empty with fewer than two."""
    devs = [g["device"] for g in fingerprint.get("gpus") or []]
    return [(a, b) for a in devs for b in devs if a != b]


def _link_signature(fingerprint, a, b):
    """What the topology says of the path from GPU a to GPU b: the link (NVLink count, generation and route, or
    PCIe's common ancestor), the P2P capabilities, and each GPU's NUMA node and local CPUs. None where the
    probe has no topology for the pair (no NVML): then no pair stands for another."""
    topo = fingerprint.get("topology") or {}
    pair = next((p for p in topo.get("pairs") or [] if p.get("a") == a and p.get("b") == b), None)
    if not pair or not pair.get("type"):
        return None
    gpus = {g.get("device"): g for g in topo.get("gpus") or []}
    where = tuple((gpus.get(d, {}).get("numa_node"), str(gpus.get(d, {}).get("cpus"))) for d in (a, b))
    caps = tuple(sorted((pair.get("p2p") or {}).items())) + tuple(sorted((pair.get("cuda_p2p") or {}).items()))
    ancestor = (pair.get("common_ancestor") or {}).get("level")
    return (pair.get("type"), pair.get("nvlinks"), pair.get("nvlink_version"), pair.get("via"), ancestor, caps, where)


def distinct_pairs(fingerprint, pairs) -> list:
    """The pairs whose link signature no earlier pair of the list has; all of them where any signature is
    unknown."""
    sigs = [_link_signature(fingerprint, a, b) for a, b in pairs]
    if any(v is None for v in sigs):
        return list(pairs)
    seen, out = set(), []
    for p, sig in zip(pairs, sigs):
        if sig not in seen:
            seen.add(sig)
            out.append(p)
    return out


def representative_pairs(fingerprint, ordered=True):
    """The GPU pairs the default suite measures across GPUs: one pair per distinct link signature
    (_link_signature), the lowest; every pair where any pair's topology is unknown. Returns (pairs, note):
    the note says how many pairs stand for how many (None where every pair is kept). On a node whose pairs
    all share one link (NVSwitch, or NV18 between every pair) one pair stands for all: `umscope bench
    latency` and `umscope bench pingpong` measure every pair."""
    pairs = [(a, b) for a, b in gpu_pairs(fingerprint) if ordered or a < b]
    chosen = distinct_pairs(fingerprint, pairs)
    if len(chosen) == len(pairs):
        return pairs, None
    return chosen, (f"{len(chosen)} of {len(pairs)} {'ordered ' if ordered else ''}GPU pairs ("
                    + ", ".join(f"{a}-{b}" for a, b in chosen) + "): the others have the same link, P2P "
                    "capabilities and locality in the probe's topology, so they repeat its figure; "
                    "`umscope bench copy`, `umscope bench latency` and `umscope bench pingpong` measure every "
                    "pair")


def _host_side(fingerprint, d):
    """What the topology says of GPU d's own way to host memory: its NUMA node and local CPUs, its PCIe link
    (generation and width, NVML's maximum); None where any of it is unknown."""
    topo = {g.get("device"): g for g in (fingerprint.get("topology") or {}).get("gpus") or []}
    link = next((g.get("link") for g in fingerprint.get("gpus") or [] if g.get("device") == d), None) or {}
    side = (str(topo.get(d, {}).get("cpus")), topo.get(d, {}).get("numa_node"), link.get("pcie_gen_max"),
            link.get("pcie_width_max"))
    return None if d not in topo or not topo[d].get("cpus") or None in side[2:] else side


def host_copies_repeat(fingerprint, a, b) -> bool:
    """Whether GPU a's SMs copying host memory to and from GPU b's memory repeat the same copies with GPU a's
    own memory: GPU b is joined to GPU a by NVLink (many times the host link's rate, so the host link bounds
    the copy) and has the same host side (_host_side). On 4 x H100 NV18 (b447ae0, docs/suite-time.md) the 12
    such figures of pair 0-1 (pinned, registered to and from peer:1, 64 KiB to 256 MiB) were within 9.0% of GPU
    0's own, inside the figures' spreads (1-85%). Not by copy engines: there, pinned and registered memory to and
    from peer:1 was 1.2-2.6 times slower at 64 KiB and 1 MiB (pinned to peer:1 3.46 against 8.59 GB/s at 64 KiB)."""
    topo = fingerprint.get("topology") or {}
    pair = next((p for p in topo.get("pairs") or [] if p.get("a") == a and p.get("b") == b), None)
    if not pair or pair.get("type") != "NVLink":
        return False
    side = _host_side(fingerprint, a)
    return side is not None and side == _host_side(fingerprint, b)


# umbench's reason for a GPU that cannot reach pageable memory (native/memory/buffer.cpp), as the probe knows it.
NO_PAGEABLE = ("the GPU cannot access pageable host memory on this machine (cudaDevAttrPageableMemoryAccess = 0: "
               "no HMM or ATS; known from the probe, so the case's own process was not started)")


def known_skip(fingerprint, case):
    """Why a case of a family that keeps its own process (suite.ISOLATED) would be skipped, where the probe
    already says so; else None. Its GPU touches pageable host memory (system, numa:N; migration and interleave
    always, firsttouch `--by gpu`, faults `--processor gpu`) and that GPU has cudaDevAttrPageableMemoryAccess 0:
    umbench would start a process, create its CUDA context and skip (0.46-0.50 s a case on 4 x H100, b447ae0: 6
    cases of the default plan)."""
    from umscope import place, suite
    if case.benchmark not in suite.ISOLATED or not case.kind:
        return None
    if native.kind_name(case.kind) not in place.PAGEABLE:
        return None
    p = case.params
    if not (case.benchmark in ("migration", "interleave") or p.get("by") == "gpu" or p.get("processor") == "gpu"):
        return None
    gpu = _gpu(dict(fingerprint, device=int(p.get("device", fingerprint.get("device", 0)))))
    return NO_PAGEABLE if gpu and gpu.get("pageable_memory_access") is False else None


def stream_cases(benchmark, kinds, sizes, extra=None) -> list:
    extra = extra or {}
    return [Case(benchmark, k, dict({"bytes": size_arg(s)}, **extra)) for k in kinds for s in sizes]


# Kinds of the copy matrix (nvbandwidth's host/device matrix and the GH200
# study's Fig. 5, with registered memory and NUMA nodes added).
COPY_KINDS = ["device", "pinned", "registered", "system"]
COPY_SIZES = "4KiB,64KiB,1MiB,16MiB,256MiB,1GiB"


def peer_copy_cases(fingerprint, sizes=COPY_SIZES, engines=("ce", "sm"), representative=False) -> list:
    """Every ordered GPU pair not already covered from the GPU under test: GPU a's memory to and from
    GPU b's, by copy engines and by SMs, one way and both ways (nvbandwidth's device-to-device tests).
    representative: only pairs whose link differs from every pair before them (distinct_pairs)."""
    me = fingerprint.get("device", 0)
    cases = []
    pairs = gpu_pairs(fingerprint)
    if representative:
        pairs = distinct_pairs(fingerprint, [p for p in pairs if p[0] == me] + [p for p in pairs if p[0] != me])
    for a, b in pairs:
        if a == me:
            continue  # the matrix of the GPU under test has its peers already
        for engine in engines:
            params = {"bytes": sizes, "engine": engine, "device": str(a)}
            cases.append(Case("copy", "device", dict(params, dst=f"peer:{b}", direction="uni")))
            cases.append(Case("copy", f"peer:{b}", dict(params, dst="device", direction="uni")))
            cases.append(Case("copy", f"peer:{b}", dict(params, dst="device", direction="bidir")))
    return cases


def copy_cases(fingerprint, kinds=None, sizes=COPY_SIZES, engines=("ce", "sm"), bidir=True,
               representative=False) -> list:
    """representative: peers of the GPU under test and GPU pairs across the node, one per distinct link; SM
    copies of host memory to and from a peer only where they do not repeat the GPU's own (host_copies_repeat)."""
    explicit = bool(kinds)
    peers = peer_kinds(fingerprint)
    me = fingerprint.get("device", 0)
    repeats = set()  # peer kinds whose SM copies with host memory repeat the GPU's own
    if representative:
        keep = {b for _, b in distinct_pairs(fingerprint, [(me, int(k.split(":")[1])) for k in peers])}
        peers = [k for k in peers if int(k.split(":")[1]) in keep]
        repeats = {k for k in peers if host_copies_repeat(fingerprint, me, int(k.split(":")[1]))}
    kinds = kinds or COPY_KINDS + numa_kinds(fingerprint) + peers
    cases = []
    for engine in engines:
        for src in kinds:
            for dst in kinds:
                if engine == "sm" and {src, dst} & repeats and not {src, dst} <= repeats | {"device"}:
                    continue  # SMs copying host memory and a peer's: they repeat the GPU's own
                params = {"dst": dst, "bytes": sizes, "engine": engine}
                cases.append(Case("copy", src, dict(params, direction="uni")))
                # Both directions at once: for each unordered host/device pair, once.
                # Between two GPUs by SMs too (one GPU's SMs pulling and pushing at once).
                if (bidir and src != dst and "device" in (src, dst) and src != "device"
                        and (engine == "ce" or src.startswith("peer:"))):
                    cases.append(Case("copy", src, dict(params, direction="bidir")))
    if not explicit:
        cases += peer_copy_cases(fingerprint, sizes, engines, representative)
    return cases


def scaling_cases(fingerprint, kinds=("device", "pinned"), ops="read,copy") -> list:
    """Blocks from 1 to the full machine (at 256 threads), then threads per block at the full grid; the
    gpu-stream ops given (--ops: read and copy unless told, write for Fusco et al.'s Fig. 8)."""
    g = _gpu(fingerprint)
    sms = g["sms"] if g else 132
    blocks = sorted({1, 2, 4, 8, 16, 32, 64, sms // 2, sms, 2 * sms, 4 * sms, 8 * sms})
    cases = []
    for k in kinds:
        for b in blocks:
            cases.append(Case("gpu-stream", k, {"bytes": "1GiB", "ops": ops, "blocks": str(b), "block": "256"}))
        for t in (64, 128, 256, 512, 1024):
            cases.append(Case("gpu-stream", k, {"bytes": "1GiB", "ops": ops, "block": str(t)}))
    return cases


# Host-side memory the GPU loads in the contention cases, while CPU threads
# stream system memory.
CONTENTION_KINDS = ["pinned", "registered", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
                    "system"]


def contention_cases(fingerprint, kinds=None, size=1 << 30, gpu_ops=("read", "write")) -> list:
    kinds = kinds or CONTENTION_KINDS + numa_kinds(fingerprint)
    return [Case("contention", k, {"bytes": size_arg(size), "gpu-op": op, "cpu-op": "read"})
            for k in kinds for op in gpu_ops]


# Latency: the GPU chases each memory it reaches; "host-device latency" is the
# GPU chasing host memory (pinned, registered, managed kept on the host).
# On-demand managed memory is left to the migration benchmarks: its first
# pass measures page faults, not loads.
LATENCY_GPU_KINDS = ["device", "managed,first_touch=cpu,prefetch=gpu", "pinned", "registered",
                     "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu", "system"]
LATENCY_CPU_KINDS = ["system", "pinned", "registered", "managed,first_touch=cpu", "managed,first_touch=gpu", "device"]
# Kinds whose pages stay in host memory while the GPU reaches them over the link.
HOST_RESIDENT = {"pinned", "registered", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu"}
HOST_CHASE_STEPS = 1 << 15
HOST_STREAM_BYTES = 256 << 20
LATENCY_SIZES = "1KiB,4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB,1GiB,4GiB"
LATENCY_SHORT = "4KiB,1MiB,64MiB,1GiB"


def latency_cases(fingerprint, kinds=None, sizes=LATENCY_SIZES, processors=("gpu", "cpu"), across=None) -> list:
    """`across`: the ordered GPU pairs chased across GPUs (default every pair)."""
    cases = []
    if not kinds and "gpu" in processors:
        # Across GPUs: each GPU chases the other's memory over the peer link.
        for a, b in gpu_pairs(fingerprint) if across is None else across:
            cases.append(Case("latency", f"peer:{b}", {"processor": "gpu", "bytes": sizes, "reps": "5",
                                                      "warmup": "0", "device": str(a)}, timeout=600))
    for proc in processors:
        ks = kinds or (LATENCY_GPU_KINDS if proc == "gpu" else LATENCY_CPU_KINDS) + numa_kinds(fingerprint)
        for k in ks:
            # Memory the CPU pulls from the GPU page by page is slow to chase: a short sweep.
            sz = sizes
            if proc == "cpu" and ("first_touch=gpu" in k or k == "device"):
                sz = ",".join(x for x in sizes.split(",") if parse_size_list(x)[0] <= 256 << 20)
            params = {"processor": proc, "bytes": sz, "reps": "5", "warmup": "0"}
            if proc == "gpu" and k in HOST_RESIDENT:
                # Each load crosses the host link (about 1.2-1.5 us on PCIe): 2^15 loads per repetition
                # (and 2^18 warm-up loads) instead of 2^17 (2^20); the H100 figures agree (bench/suite_time.py).
                params["steps"] = str(HOST_CHASE_STEPS)
            cases.append(Case("latency", k, params, timeout=600))
    return cases


MIGRATING_EXCHANGES = 500
PINGPONG = {"cpu-gpu": ["pinned", "registered", "managed", "system"],
            "gpu-gpu": ["device", "pinned", "registered", "managed"],
            "cpu-cpu": ["system", "pinned", "registered", "managed"]}


def pingpong_cases(fingerprint, kinds=None, pairs=None, exchanges=10000, across=None) -> list:
    """`across`: the GPU pairs (a < b) of the cases across GPUs (default every pair)."""
    cases = []
    for pair, ks in PINGPONG.items():
        if pairs and pair not in pairs:
            continue
        ks = kinds or ks + ([] if pair == "gpu-gpu" else numa_kinds(fingerprint))
        for k in ks:
            params = {"pair": pair, "exchanges": str(exchanges), "reps": "7"}
            if pair == "cpu-gpu" and k == "managed":
                # Each turn migrates the flag's page (about 1-2 ms on an x86 PCIe host): fewer repetitions
                # of fewer exchanges (10^4 took 32 s); still 1500 migrating round trips.
                params.update(exchanges=str(MIGRATING_EXCHANGES), reps="3", warmup="0")
            cases.append(Case("pingpong", k, params, timeout=300))
    if not kinds and (not pairs or "gpu-gpu" in pairs):
        # Across GPUs: one agent on each GPU of a pair, the flag on the first, on the second, or on the host.
        for a, b in gpu_pairs(fingerprint) if across is None else across:
            if a < b:
                for k in ("device", f"peer:{b}", "pinned", "managed"):
                    cases.append(Case("pingpong", k, {"pair": "gpu-gpu", "peer": str(b), "device": str(a),
                                                      "exchanges": str(exchanges), "reps": "7"}, timeout=300))
    return cases


# Unified-memory dynamics. Each placement and each hint is its own case, so
# the report shows what each buys.
MIGRATION_KINDS = [
    "device",
    "managed,first_touch=cpu",
    "managed,first_touch=gpu",
    "managed,first_touch=cpu,prefetch=gpu",
    "managed,first_touch=cpu,advise=preferred:gpu",
    "managed,first_touch=cpu,advise=accessed_by:gpu",
    "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
    "managed,first_touch=cpu,advise=read_mostly",
    "pinned",
    "registered",
    "system",
    "system,page=thp",
]
MIGRATION_SIZES = [128 << 20, 1 << 30, 4 << 30, 16 << 30, 32 << 30]


def _gpu(fingerprint):
    """The GPU under test (fingerprint['device'], set from --device), or None."""
    want = fingerprint.get("device", 0)
    return next((g for g in fingerprint.get("gpus") or [] if g.get("device") == want), None)


def gpu_free(fingerprint) -> int:
    g = _gpu(fingerprint)
    return g.get("free_mem", 0) if g else 0


def migration_cases(fingerprint, kinds=None, sizes=None, iterations=100, trials=3, ops=("read",),
                    touch_variants=True) -> list:
    """Sizes beyond 80% of the GPU's free memory are left out (the guard would refuse them)."""
    kinds = kinds or MIGRATION_KINDS + numa_kinds(fingerprint)
    free = gpu_free(fingerprint)
    sizes = [s for s in (sizes or MIGRATION_SIZES) if not free or s <= 0.8 * free] or [128 << 20]
    cases = []
    for op in ops:
        for k in kinds:
            for s in sizes:
                cases.append(Case("migration", k, {"op": op, "bytes": size_arg(s), "iterations": str(iterations),
                                                   "trials": str(trials), "reps": "1", "warmup": "0"}, timeout=900))
    if touch_variants:
        # Ownership ping-pong: the CPU writes the buffer between GPU iterations.
        for k in ("managed,first_touch=cpu", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
                  "pinned"):
            for touch in ("full", "stride"):
                cases.append(Case("migration", k, {"op": "read", "bytes": "1GiB", "iterations": str(iterations),
                                                   "trials": "1", "cpu-touch": touch, "reps": "1", "warmup": "0"},
                                  timeout=900))
    return cases


FIRSTTOUCH = [("system", "cpu"), ("system,page=thp", "cpu"), ("system,page=base", "cpu"), ("system", "gpu"),
              ("system,page=thp", "gpu"), ("pinned", "cpu"), ("pinned", "gpu"), ("registered", "cpu"),
              ("registered", "gpu"), ("managed", "cpu"), ("managed", "gpu"), ("device", "gpu")]


def firsttouch_cases(fingerprint, kinds=None, sizes=(1 << 30, 4 << 30), reps=3) -> list:
    pairs = [(k, b) for k in kinds for b in ("cpu", "gpu")] if kinds else FIRSTTOUCH
    cases = []
    for k, by in pairs:
        for s in sizes:
            params = {"by": by, "bytes": size_arg(s), "reps": str(reps), "warmup": "0"}
            cases.append(Case("firsttouch", k, params, timeout=600))
            if by == "gpu" and k.startswith("system"):
                # The study's mitigation: the CPU touches each page first.
                cases.append(Case("firsttouch", k, dict(params, pretouch="cpu"), timeout=600))
    return cases


def fault_cases(fingerprint, kinds=None, size=1 << 30) -> list:
    """GPU touching CPU-placed managed memory, and the CPU touching GPU-placed memory and fresh pages."""
    combos = [("managed,first_touch=cpu", "gpu"), ("managed,first_touch=gpu", "cpu"),
              ("system,first_touch=none", "cpu"), ("system,first_touch=none", "gpu")]
    if kinds:
        combos = [(k, p) for k in kinds for p in ("gpu", "cpu")]
    # One touch per base page and upwards: on a kernel of 64 KiB pages (Grace) a 4 KiB stride would touch
    # each page 16 times and count one fault for 16 touches.
    page = ((fingerprint or {}).get("host") or {}).get("page_size") or 4096
    strides = ",".join(size_arg(s) for s in (4096, 64 << 10, 2 << 20) if s >= page)
    cases = []
    for k, proc in combos:
        for mode in ("parallel", "serial"):
            cases.append(Case("faults", k, {"processor": proc, "mode": mode, "bytes": size_arg(size),
                                            "stride": strides, "reps": "3", "warmup": "1"}, timeout=600))
    return cases


def interleave_cases(fingerprint, kinds=None, size=256 << 20, ns="1,2,4,8,16,32,64,128,256") -> list:
    kinds = kinds or ["managed,first_touch=cpu", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
                      "pinned", "registered", "system"]
    return [Case("interleave", k, {"bytes": size_arg(size), "cpu-write": w, "n": ns}, timeout=600)
            for k in kinds for w in ("full", "stride")]


def oversub_cases(fingerprint, kinds=None, dos=None, available=None, allow=False, iterations=10) -> list:
    """Degree of oversubscription = footprint / GPU memory left free by a ballast. Above 1 only
    with --allow-oversubscription: it can hang a shared GPU."""
    if dos:
        levels = [float(x) for x in str(dos).split(",") if x]
    else:
        levels = [0.25, 0.5, 0.75, 0.9] + ([1.1, 1.25, 1.5, 2.0] if allow else [])
    if any(x <= 0 for x in levels):
        raise UsageError("--dos takes positive numbers")
    kinds = kinds or ["managed,first_touch=cpu", "managed,first_touch=gpu", "system"]
    avail = available or "8GiB"
    return [Case("migration", k, {"op": "read", "dos": f"{x:g}", "available": avail, "iterations": str(iterations),
                                  "trials": "1", "reps": "1", "warmup": "0"}, timeout=900)
            for k in kinds for x in levels]


def cpu_stream_size(fingerprint, threads=None) -> int:
    """Arrays past the last-level cache that `threads` CPU threads can reach (None: every allowed CPU), so that
    the CPU streams measure memory, not cache: one thread reaches its own LLC instance (sysfs shared_cpu_list),
    a team every instance its CPUs sit in. A team's arrays are 4x that cache; one thread's 2x: on the H100 host
    (one 300 MiB L3) a single thread's read, write and copy at 1x and 2x the L3 were within 5% and 17% of the
    4x figures, inside their spreads (22-57%), while 16 threads read 23% faster at 1x. Without instance data,
    the largest cache."""
    cpu = fingerprint.get("cpu", {})
    inst = cpu.get("llc_instances") or []
    if inst:
        allowed = sorted({c for i in inst for c in i["cpus"]})
        use = set(allowed if threads is None else _team_cpus(allowed, inst, threads))
        reach = sum(i["bytes"] for i in inst if use & set(i["cpus"]))
    else:
        reach = max((c["bytes"] for c in cpu.get("caches", [])), default=0)
        if not reach:  # nothing known of the caches: past any of today's LLCs
            return 256 << 20
    factor = SINGLE_THREAD_FACTOR if threads == 1 else 4
    return max(64 << 20, -(-factor * reach // (1 << 20)) << 20)


SINGLE_THREAD_FACTOR = 2


def _team_cpus(allowed, instances, threads) -> list:
    """The CPUs a team of `threads` fills first: umbench's ThreadTeam takes them in order (cores first);
    one thread sits in the first instance."""
    return allowed[:max(1, threads)]


# Repetitions of the single-thread CPU stream (after the usual 2 warm-up ones): one thread's pass over arrays of
# twice the LLC takes 85-115 ms per operation, so 20 repetitions made it a quarter of the default suite. On the
# H100 host (30 figures of two full-suite runs, bench/first_reps.py, docs/suite-reps.md) the median of the first
# 8 of 20 repetitions was within 5.0% of the 20-repetition median, inside the samples' own spread (6-48%) and
# the change of the same figure from one run to the other (up to 27%). A team's first 8 were up to 33% off its
# 20: the team keeps 20.
SINGLE_THREAD_REPS = 8


def cpu_stream_cases(fingerprint, kinds, thread_counts=("1", "all")) -> list:
    """One case per kind over the thread counts, each count at arrays 4x the cache it reaches; where those
    sizes differ (one thread reaches less cache than all), one case per size; a single thread's case repeats
    SINGLE_THREAD_REPS times."""
    by_size = {}
    for t in thread_counts:
        size = cpu_stream_size(fingerprint, None if t == "all" else int(t))
        by_size.setdefault(size, []).append(t)
    cases = []
    for k in kinds:
        for size, ts in by_size.items():
            extra = {"threads": ",".join(ts)}
            if ts == ["1"]:
                extra["reps"] = str(SINGLE_THREAD_REPS)
            cases += stream_cases("cpu-stream", [k], [size], extra)
    return cases


def quick_plan(fingerprint) -> list:
    """`umscope run --quick`: every family and report section of the default plan, each at its key points
    (the main kinds, one size or short sweep, every application in explicit and managed mode), in about a
    minute on one H100. Every case still warms up, repeats and verifies as in the default plan."""
    size = 256 << 20
    cases = stream_cases("gpu-stream", ["device", "managed,first_touch=gpu", "managed,first_touch=cpu", "pinned"],
                         [size])
    cases += cpu_stream_cases(fingerprint, ["system"], ("all",))
    cases += copy_cases(fingerprint, ["device", "pinned", "system"], sizes="64KiB,256MiB", engines=("ce",))
    cases += contention_cases(fingerprint, ["pinned"], size=cpu_stream_size(fingerprint), gpu_ops=("read",))
    cases += latency_cases(fingerprint, ["device", "pinned"], LATENCY_SHORT, processors=("gpu",))
    cases += latency_cases(fingerprint, ["system"], LATENCY_SHORT, processors=("cpu",))
    cases += [Case("pingpong", k, {"pair": pair, "exchanges": "10000", "reps": "7"}, timeout=300)
              for pair, k in (("cpu-gpu", "pinned"), ("gpu-gpu", "device"), ("cpu-cpu", "system"))]
    cases += migration_cases(fingerprint, ["device", "managed,first_touch=cpu", "managed,first_touch=cpu,prefetch=gpu"],
                             sizes=[size], iterations=20, trials=1, touch_variants=False)
    cases += [c for c in firsttouch_cases(fingerprint, sizes=(size,), reps=2)
              if (c.kind, c.params["by"]) in {("system", "cpu"), ("managed", "gpu"), ("device", "gpu")}]
    cases += fault_cases(fingerprint, ["managed,first_touch=cpu"], size=size)[:1]
    cases += interleave_cases(fingerprint, ["managed,first_touch=cpu"], size=size, ns="1,4,16,64")[:1]
    from umscope import apps
    cases += [c for c in apps.default_cases() if c.params.get("mode") in ("explicit", "managed")
              and c.params.get("check") != "1" and c.params.get("init", "gpu") == "gpu"]
    for c in cases:
        if c.kind in HOST_RESIDENT and c.benchmark == "latency":
            c.params["steps"] = str(HOST_CHASE_STEPS)
    return cases


def default_plan(fingerprint, quick=False) -> list:
    if quick:
        return quick_plan(fingerprint)
    size = 1 << 30
    gpu_kinds = GPU_KINDS + numa_kinds(fingerprint)
    cpu_kinds = CPU_KINDS[:1] + numa_kinds(fingerprint) + CPU_KINDS[1:]
    # Kept under 5 minutes on one H100/H200: single-thread CPU streams and host
    # copies are slow, so CPU arrays are 4x the largest cache (at least 256 MiB:
    # past the cache, not more); the full
    # 4 KiB - 1 GiB copy sweep is `umscope bench copy`.
    # Host-resident kinds stream over the host link (about 50 GB/s): 256 MiB passes of 5 ms measure the link
    # as 1 GiB ones do (the H100 figures agree), in a quarter of the time.
    cases = [c for k in gpu_kinds for c in stream_cases("gpu-stream", [k], [min(size, HOST_STREAM_BYTES)
                                                                             if k in HOST_RESIDENT else size])]
    cases += cpu_stream_cases(fingerprint, cpu_kinds)
    cases += copy_cases(fingerprint, sizes="64KiB,1MiB,256MiB", representative=True)
    cases += contention_cases(fingerprint, ["pinned"], size=max(size, cpu_stream_size(fingerprint)))
    # Across GPUs: one pair per distinct link in the topology (on a uniform NVSwitch or NV18 node every pair
    # repeats one figure); the note goes into the run's fingerprint, and so into the report.
    lat_pairs, lat_note = representative_pairs(fingerprint, ordered=True)
    pp_pairs, pp_note = representative_pairs(fingerprint, ordered=False)
    if lat_note:
        me = fingerprint.get("device", 0)
        same_host = [b for a, b in lat_pairs if a == me and host_copies_repeat(fingerprint, me, b)]
        if same_host:
            gpus = ", ".join(map(str, same_host))
            lat_note += (f"; GPU {me}'s SMs copying host memory to and from GPU {gpus}'s memory are left out: "
                         f"joined to GPU {me} by NVLink, with the same NUMA node, local CPUs and PCIe link, so the "
                         f"host link bounds them and they repeat the SM copies with GPU {me}'s own memory (copy "
                         "engines are kept: they differ there; `umscope bench copy` measures both)")
        fingerprint["pair_choice"] = {"note": lat_note, "pairs": [list(p) for p in lat_pairs],
                                      "families": ["copy (peer matrix)", "latency", "pingpong"]}
    cases += latency_cases(fingerprint, sizes=LATENCY_SHORT, across=lat_pairs)
    cases += pingpong_cases(fingerprint, across=pp_pairs)
    # A short NCCL case where there are 2+ GPUs, beside the other cases across GPUs: under --visible-gpus case
    # they share one batch process that sees every GPU (its start took 1.09 s before the NCCL case on 4 x H100
    # when NCCL came last, after the applications: b447ae0).
    cases += scaleout.default_cases(fingerprint)
    # Unified-memory dynamics, short: 1 GiB, 20 iterations, one trial.
    cases += migration_cases(fingerprint, MIGRATION_KINDS[:4] + ["managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu",
                                                                 "pinned", "system"],
                             sizes=[size], iterations=20, trials=1, touch_variants=False)
    cases += firsttouch_cases(fingerprint, sizes=(size,), reps=2)
    cases += fault_cases(fingerprint, size=256 << 20)
    cases += interleave_cases(fingerprint, ["managed,first_touch=cpu", "pinned"], size=256 << 20, ns="1,4,16,64")
    # Applications, short: every application in every memory mode at 64-256 MiB; Quantum Volume at 22 qubits
    # (64 MiB), GPU- and CPU-initialised.
    from umscope import apps
    cases += apps.default_cases()
    for c in cases:
        c.skip = known_skip(fingerprint, c)
    return cases


@dataclass(frozen=True)
class BenchOptions:
    """What `umscope bench` passes a family's plan (validate.bench_options, in canonical form); kinds already
    checked by umbench's parser where the family takes them."""
    kinds: list = None
    sizes: str = None
    threads: str = None
    ops: str = None
    mode: str = None
    iterations: int = None
    dos: str = None
    available: str = None
    allow_oversubscription: bool = False
    scale: dict = None


@dataclass(frozen=True)
class Family:
    """One family `umscope bench` runs: its help line, its plan (fingerprint, BenchOptions) -> cases, whether its
    buffers are whole pages (PAGE_SIZED), and whether it takes --kind (a family that does not ignores it)."""
    help: str
    plan: Callable
    page_sized: bool = False
    takes_kind: bool = True


def _sizes_text(o, default):
    return ",".join(size_arg(s) for s in parse_size_list(o.sizes)) if o.sizes else default


def _first_size(o, default):
    return parse_size_list(o.sizes)[0] if o.sizes else default


def _plan_gpu_stream(fp, o):
    extra = {"ops": o.ops} if o.ops else {}
    return stream_cases("gpu-stream", o.kinds or GPU_KINDS + numa_kinds(fp) + peer_kinds(fp),
                        parse_size_list(o.sizes) if o.sizes else [1 << 30], extra)


def _plan_cpu_stream(fp, o):
    extra = {"ops": o.ops} if o.ops else {}
    extra["threads"] = o.threads or "1,all"
    return stream_cases("cpu-stream", o.kinds or CPU_KINDS[:1] + numa_kinds(fp) + CPU_KINDS[1:],
                        parse_size_list(o.sizes) if o.sizes else [1 << 30], extra)


def _plan_contention(fp, o):
    return contention_cases(fp, o.kinds, _first_size(o, max(1 << 30, cpu_stream_size(fp))))


def _plan_bandwidth(fp, o):
    allcpu = os.cpu_count() or 1
    sweep = ",".join(str(t) for t in sorted({1, 2, 4, 8, 16, 32, 64, 128, allcpu}) if t <= allcpu)
    return (_plan_gpu_stream(fp, BenchOptions(kinds=o.kinds, sizes=o.sizes)) +
            _plan_cpu_stream(fp, BenchOptions(sizes=o.sizes, threads=o.threads or sweep)) +
            copy_cases(fp) + scaling_cases(fp) + _plan_contention(fp, BenchOptions()))


def _plan_selftest(fp, o):
    modes = dict.fromkeys((o.mode or "ok").split(","))  # a repeated mode is the same case: once
    return [Case("selftest", None, {"mode": m}, timeout=10) for m in modes]


def _plan_apps(fp, o):
    from umscope import apps
    return apps.default_cases()


def _plan_scaleout(name):
    def plan(fp, o):
        return scaleout.plan(name, fp, o.kinds, o.sizes, o.ops, **(o.scale or {}))
    return plan


def _plan_linkbytes(fp, o):
    return [Case("linkbytes", None, {"op": op, "bytes": "1g", "reps": "2", "warmup": "0"}, timeout=300)
            for op in ("zerocopy-read", "h2d-copy", "managed-migrate")]


def _plan_oversub(fp, o):
    avail = size_arg(parse_size_list(o.available)[0]) if o.available else None
    return oversub_cases(fp, o.kinds, o.dos, avail, o.allow_oversubscription, o.iterations or 10)


FAMILIES = {
    "gpu-stream": Family("GPU read/write/copy/triad over every GPU-reachable kind", _plan_gpu_stream, True),
    "cpu-stream": Family("CPU read/write/copy over every CPU-reachable kind, thread sweep", _plan_cpu_stream, True),
    "copy": Family("copy matrix: every source x destination kind by copy engines and by SMs, 4 KiB to 1 GiB",
                   lambda fp, o: copy_cases(fp, o.kinds, _sizes_text(o, COPY_SIZES))),
    "scaling": Family("GPU read/copy (--ops) bandwidth from 1 block to the full machine, and threads per block",
                      lambda fp, o: scaling_cases(fp, o.kinds or ("device", "pinned"), o.ops or "read,copy")),
    "contention": Family("GPU loading host memory over the link while CPU threads stream it, and the reverse",
                         _plan_contention, True),
    "bandwidth": Family("all of the above: gpu-stream, cpu-stream (thread sweep), copy matrix, scaling, contention",
                        _plan_bandwidth, True),
    "latency": Family("pointer chase by one GPU or CPU thread over every kind, 1 KiB to 4 GiB footprints",
                      lambda fp, o: latency_cases(fp, o.kinds, _sizes_text(o, LATENCY_SIZES))),
    "pingpong": Family("round trip of a flag passed by system-scope CAS: CPU-GPU, GPU-GPU, CPU-CPU, per kind",
                       lambda fp, o: pingpong_cases(fp, o.kinds)),
    "migration": Family("a GPU kernel repeated 100 times over one buffer per placement and hint, 128 MiB to 32 GiB",
                        lambda fp, o: migration_cases(fp, o.kinds, parse_size_list(o.sizes) if o.sizes else None,
                                                      o.iterations or 100, ops=tuple((o.ops or "read").split(","))),
                        True),
    "firsttouch": Family("allocation, first and second touch, free: per kind, processor and page size",
                         lambda fp, o: firsttouch_cases(fp, o.kinds, tuple(parse_size_list(o.sizes)) if o.sizes
                                                        else (1 << 30, 4 << 30)), True),
    "faults": Family("microseconds per page touched by the processor that did not place it, base page (4 KiB or "
                     "64 KiB) to 2 MiB strides", lambda fp, o: fault_cases(fp, o.kinds, _first_size(o, 1 << 30)), True),
    "interleave": Family("CPU writes interleaved with N back-to-back GPU writes, N from 1 to 256",
                         lambda fp, o: interleave_cases(fp, o.kinds, _first_size(o, 256 << 20)), True),
    "oversub": Family("GPU passes over a footprint sized as a degree of oversubscription of what a ballast leaves free",
                      _plan_oversub),
    "apps": Family("the application suite in every memory mode at 64-256 MiB (as in the default suite; bigger with "
                   "'umscope app run NAME --footprint')", _plan_apps, takes_kind=False),
    "nccl": Family("NCCL all-reduce, all-gather, reduce-scatter, broadcast, all-to-all over every local GPU (or one "
                   "rank per GPU with --launcher), buffers of every kind, algbw and busbw as nccl-tests; --size full: "
                   "8 B-4 GiB", _plan_scaleout("nccl")),
    "mpi": Family("MPI point-to-point under the site's launcher (--launcher mpirun|srun|flux -n N [--ppn P]): window "
                  "and bidirectional bandwidth, latency, k-pair throughput; --kind and --peer-kind per side",
                  _plan_scaleout("mpi")),
    "linkbytes": Family("one operation with known host-link bytes (1 GiB zero-copy read, copy-engine copy, managed "
                        "first-touch migration) between quiet gaps: what hardware counters are checked against",
                        _plan_linkbytes, True),
    "selftest": Family("cases that misbehave on purpose (crash, hang, GPU fault) to test the runner", _plan_selftest,
                       takes_kind=False),
}


# Families whose buffers are whole pages: umbench's Args::page_bytes (native/core/bench.cpp) refuses --bytes below
# 4 KiB for them, so `umscope bench --size` does too, before a run exists.
PAGE_SIZED = {name for name, f in FAMILIES.items() if f.page_sized}
MIN_PAGE_BYTES = 4096


def _native_family(name, help_):
    """A family declared only in native code: planned by native_cases from its registry entry."""
    return Family(help_, lambda fp, o: native_cases(name, fp, o.kinds, o.sizes, o.threads, o.ops))


def family_table() -> dict:
    """Every family `umscope bench` runs, name -> Family: the plans above, then each family the runner declares
    (`umbench list --json`) that has no plan of its own here (run by native_cases), with its native help."""
    out = dict(FAMILIES)
    try:
        from umscope import registry
        for name, b in registry.benchmarks().items():
            if b.get("category") == "family" and name not in out:
                out[name] = _native_family(name, b["help"])
    except UsageError:  # no usable umbench: the planned families only (running them says why)
        pass
    return out


def families() -> dict:
    """Every family `umscope bench` runs, name -> help line (family_table)."""
    return {name: f.help for name, f in family_table().items()}


def native_cases(name, fingerprint, kinds=None, sizes=None, threads=None, ops=None) -> list:
    """The plan of a family declared only in native code: one case per kind (the GPU or CPU kinds where it
    takes --kind and none is given) and size, passing --ops and --threads where it takes them."""
    from umscope import registry
    b = registry.benchmarks()[name]
    params = set(b["params"])
    extra = {k: v for k, v in (("ops", ops), ("threads", threads)) if v and k in params}
    if "kind" in params:
        kinds = kinds or (GPU_KINDS if "gpu" in b["processor"] else CPU_KINDS)
    else:
        kinds = [None]
    sizes = parse_size_list(sizes) if sizes and "bytes" in params else []
    if not sizes:
        return [Case(name, k, dict(extra)) for k in kinds]
    return stream_cases(name, kinds, sizes, extra)


def bench_plan(name, fingerprint, kinds=None, **options) -> list:
    """The cases of `umscope bench NAME`: the family's own plan (family_table), its --kind specs checked first
    where it takes them. options: the other BenchOptions fields."""
    table = family_table() if name not in FAMILIES else FAMILIES
    if name not in table:
        raise UsageError(f"unknown benchmark {name!r} (known: {', '.join(table)})")
    family = table[name]
    if family.takes_kind and kinds:
        kinds = [validate_kind(k) for k in kinds]
    return family.plan(fingerprint, BenchOptions(kinds=kinds, **options))


def apply_filter(cases, patterns) -> list:
    if not patterns:
        return cases
    kept = [c for c in cases if all(p in c.case_id for p in patterns)]
    if not kept:
        raise UsageError(f"--filter {' '.join(patterns)!r} matches no case")
    return kept
