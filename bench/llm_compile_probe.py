"""h20 probe: the llm app's decode step, uncompiled vs torch.compile'd, both captured as CUDA graphs, on the
same model (PyTorch's allocator, device memory, fp16): ms/token (median of 2 x 99 steps), compile seconds,
logits errors (first, step1, last) and a profile of the compiled step."""
import json
import os
import sys
import time

import torch

from umscope.apps import llm

OUT = os.environ.get("O", "/tmp")
DEADLINE = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 100)
res = []


def emit(**kw):
    res.append(kw)
    print(json.dumps(kw), flush=True)
    with open(os.path.join(OUT, "compile.json"), "w") as f:
        json.dump(res, f)


class A:
    pass


def one(model_name, tokens=100, prompt=32):
    a = A()
    a.model, a.precision, a.seed, a.device, a.batch = model_name, "fp16", 1, 0, 1
    t0 = time.time()
    with torch.inference_mode():
        model, wbytes, config = llm._build(a, torch)
        torch.cuda.synchronize()
        build = time.time() - t0
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, config.vocab_size, (1, prompt), generator=g).to("cuda:0")
        out = {}
        for comp in ((False, True, "layers") if model_name == "llama-1b" else (False, "layers", True)):
            if comp and DEADLINE - time.time() < 22:
                emit(model=model_name, variant=str(comp), skipped=f"{DEADLINE - time.time():.0f} s left")
                continue
            dec = llm.Decoder(model, config, 1, prompt, tokens, torch, compile_step=comp)
            t1 = time.time()
            dec.capture(ids)
            cap = time.time() - t1
            runs = [dec.generate(ids, tokens - 1) for _ in range(2 if model_name != "llama-1b" else 1)]
            steps = sorted(s for r in runs for s in r[1])
            seen = dict(dec.logits_seen(), tokens=runs[-1][4])
            out[comp] = seen
            prof = llm._profile(dec, ids, 10, wbytes, torch) if time.time() < DEADLINE - 15 and (
                comp or model_name != "llama-1b") else None
            emit(model=model_name, variant=str(comp), compiled=dec.compiled, compile_s=dec.compile_s, compile_error=dec.compile_error,
                 graph=dec.graph is not None, graph_error=dec.graph_error, build_s=build, capture_wall_s=cap,
                 ms_per_token=1e3 * steps[len(steps) // 2], min_ms=1e3 * steps[0], max_ms=1e3 * steps[-1],
                 prefill_ms=1e3 * sorted(r[0] for r in runs)[0], weight_bytes=wbytes,
                 profile={k: prof[k] for k in ("kernels_per_step", "kernel_s_per_step", "gap_s_per_step",
                                               "matmul_gbps", "top_kernels")} if prof else None)
            if comp == "layers":
                dec._uncompile()
            del dec
            if comp:
                errs = {k: llm._rel(out[comp][k], out[False][k]) for k in ("first", "step1", "last")}
                same = bool(torch.equal(out[comp]["tokens"], out[False]["tokens"]))
                diff = (out[comp]["tokens"] != out[False]["tokens"]).nonzero()
                emit(model=model_name, variant=str(comp), rel_errors=errs, tokens_match=same,
                     first_token_diff=int(diff[0, 1]) if len(diff) else None)
    del model
    torch.cuda.empty_cache()


def main():
    import transformers
    print(torch.__version__, transformers.__version__, flush=True)
    for m in ("llama-1b", "llama-8b"):
        left = DEADLINE - time.time()
        if m == "llama-8b" and left < 35:
            emit(model=m, skipped=f"{left:.0f} s left")
            continue
        try:
            one(m)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            emit(model=m, error=f"{type(e).__name__}: {str(e)[:500]}")


if __name__ == "__main__":
    main()
