"""Which cases a command runs. The default plan (`umscope run`) is a short
characterisation of the node; each benchmark family can also run alone
(`umscope bench NAME`). Plans are built from the probe, so kinds the machine
cannot serve still appear: they are recorded as skipped, with the reason."""

import subprocess

from umscope import native
from umscope.errors import UsageError
from umscope.sizes import format_size, parse_size_list
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
    return [f"numa:{n['id']}" for n in fingerprint.get("numa", []) if n.get("mem_bytes")]


def validate_kind(spec: str) -> str:
    """Checks a kind spec with umbench's own parser; returns it unchanged."""
    res = subprocess.run([native.umbench_path(), "check-kind", spec], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise UsageError(res.stderr.strip() or f"bad memory kind {spec!r}")
    return spec


def size_arg(n: int) -> str:
    """A size as umbench takes it, readable in case ids: 268435456 -> '256MiB'."""
    text = format_size(n).replace(" ", "")
    return text if "." not in text else str(n)


def stream_cases(benchmark, kinds, sizes, extra=None) -> list:
    extra = extra or {}
    return [Case(benchmark, k, dict({"bytes": size_arg(s)}, **extra)) for k in kinds for s in sizes]


def default_plan(fingerprint, quick=False) -> list:
    size = 256 << 20 if quick else 1 << 30
    gpu_kinds = GPU_KINDS + numa_kinds(fingerprint)
    cpu_kinds = CPU_KINDS[:1] + numa_kinds(fingerprint) + CPU_KINDS[1:]
    cases = stream_cases("gpu-stream", gpu_kinds, [size])
    cases += stream_cases("cpu-stream", cpu_kinds, [size], {"threads": "1,all"})
    return cases


FAMILIES = {
    "gpu-stream": "GPU read/write/copy/triad over every GPU-reachable kind",
    "cpu-stream": "CPU read/write/copy over every CPU-reachable kind, thread sweep",
    "selftest": "cases that misbehave on purpose (crash, hang, GPU fault) to test the runner",
}


def bench_plan(name, fingerprint, kinds=None, sizes=None, threads=None, ops=None, mode=None) -> list:
    if name not in FAMILIES:
        raise UsageError(f"unknown benchmark {name!r} (known: {', '.join(FAMILIES)})")
    if name == "selftest":
        return [Case("selftest", None, {"mode": m}, timeout=10) for m in (mode or "ok").split(",")]
    if kinds:
        kinds = [validate_kind(k) for k in kinds]
    sizes = parse_size_list(sizes) if sizes else [1 << 30]
    extra = {}
    if ops:
        extra["ops"] = ops
    if name == "gpu-stream":
        return stream_cases(name, kinds or GPU_KINDS + numa_kinds(fingerprint), sizes, extra)
    if threads:
        extra["threads"] = threads
    else:
        extra["threads"] = "1,all"
    return stream_cases(name, kinds or CPU_KINDS[:1] + numa_kinds(fingerprint) + CPU_KINDS[1:], sizes, extra)


def apply_filter(cases, patterns) -> list:
    if not patterns:
        return cases
    kept = [c for c in cases if all(p in c.case_id for p in patterns)]
    if not kept:
        raise UsageError(f"--filter {' '.join(patterns)!r} matches no case")
    return kept
