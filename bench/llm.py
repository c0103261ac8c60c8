#!/usr/bin/env python3
"""LLM decode per model and placement (fusco2024 Fig. 17 on this machine): time per token, tokens/s and
the time for the tokens, against the bound of where the weights live (weights / HBM or host-link peak,
from umscope's bounds model). Weights are RANDOM (built from the configurations; nothing downloaded).
Each case is one `python -m umscope.apps.llm` process; mode torch runs first per model (the reference of
the cross-mode logits check).

    python3 bench/llm.py [--tokens 100] [--precision fp32] [--quick]

Rows: the largest model that fits in device memory, device-placed (target >= 70% of the HBM bound) and
managed-prefetch (target: within 5% of device once resident); a host-resident model read in place over
the link (pinned, and mixed: weights pinned, cache on the GPU; target >= 80% of the host-link bound)."""
import argparse
import json
import subprocess
import sys
import time

from umscope import probe
from umscope.apps import llm
from umscope.model import bounds

PLAN = [  # (model, modes)
    ("llama-8b", ["torch", "explicit", "managed-prefetch"]),
    ("gpt2-xl", ["torch", "explicit", "pinned", "mixed"]),
    ("llama-1b", ["torch", "explicit", "managed-prefetch", "pinned", "mixed", "managed-advice"]),
]


def run(model, mode, a):
    argv = [sys.executable, "-m", "umscope.apps.llm", "--model", model, "--mode", mode, "--tokens", str(a.tokens),
            "--precision", a.precision, "--prompt", str(a.prompt)]
    t0 = time.time()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    recs = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    status = recs[-1] if recs else {"status": "failed", "reason": res.stderr[-300:]}
    return next((r for r in recs if r.get("op") == "decode"), None), status, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--precision", default="fp32", help="fp32 (default: decode is bandwidth-bound, not "
                                                        "launch-bound, in eager PyTorch), fp16, bf16")
    ap.add_argument("--quick", action="store_true", help="llama-1b only")
    a = ap.parse_args()
    fp = probe.probe()
    if not fp.get("gpus"):
        sys.exit(f"no GPU: {fp['cuda'].get('why_no_gpu')}")
    desc = bounds.describe(fp)
    for k in ("gpu_memory", "h2d"):
        v = desc["datapaths"].get(k)
        print(f"bound {k}: {v[0]:g} GB/s ({v[1]})" if v else f"bound {k}: unknown")
    print(f"{'model':<10} {'GiB':>6} {'mode':<17} {'ms/token':>9} {'spread':>7} {'tok/s':>8} "
          f"{f'{a.tokens} tok s':>9} {'bound ms':>9} {'of bound':>8}  verified (max rel err)")
    plan = PLAN[2:] if a.quick else PLAN
    device_ms = {}
    for model, modes in plan:
        for mode in modes:
            rec, status, wall = run(model, mode, a)
            gib = llm.weight_bytes(model, a.precision) / 2**30
            if not rec:
                print(f"{model:<10} {gib:>6.2f} {mode:<17} {status['status']}: {status.get('reason', '')[:150]}",
                      flush=True)
                continue
            b, path = llm.token_bound(rec, desc)
            ms = rec["median"] * 1e3
            if mode == "explicit":
                device_ms[model] = ms
            vs = f" ({ms / device_ms[model] - 1:+.1%} vs explicit)" if mode == "managed-prefetch" and \
                model in device_ms else ""
            print(f"{model:<10} {gib:>6.2f} {mode:<17} {ms:>9.3f} {100 * rec['spread']:>6.1f}% "
                  f"{rec['tokens_per_s']:>8.1f} {rec['total_s']:>9.3f} {1e3 * b if b else 0:>9.3f} "
                  f"{(100 * b / rec['median']) if b else 0:>7.0f}%  {rec['verified']} ({rec['max_rel_error']:.1g})"
                  f"{vs} [{path}, {wall:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
