#!/usr/bin/env bash
# The binary wheel on a GPU machine (issue 37): a fresh venv, no CUDA toolkit on PATH or the library path,
# `pip install` of the wheel in .wheels/ (built by .ci/wheel; carry .wheels), timed, then
# `umscope run --quick` from outside the source tree. Offline: the wheel's two dependencies (pyyaml,
# nvidia-ml-py) are installed from wheels beside it in .wheels/, and `pip check` and `umscope info --json`
# show which umscope runs.
# Writes $OUT/wheel.log, $OUT/info.json, $OUT/quick.log; prints the quick run's tail, then the summary last (a
# caller keeping the last lines keeps the install time). About 1 minute on the H100 (quick run 37 s).
set -uo pipefail
OUT=${OUT:-/tmp/wheel-out}; mkdir -p "$OUT"
whl=$(ls "$PWD"/.wheels/umscope-*-manylinux_*_x86_64.whl 2>/dev/null | head -1)
[ -n "$whl" ] || { echo "no .wheels/umscope-*-manylinux_*_x86_64.whl (carry .wheels)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clean_path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -i cuda | paste -sd: -)
hide=(env -u CUDACXX -u CUDA_PATH -u CUDA_HOME -u LD_LIBRARY_PATH -u PYTHONPATH PATH="$clean_path")
# A plain venv: on the GPU machine python3 is itself a venv's, whose packages a --system-site-packages venv
# does not see (seen 2026-11-27: no pyyaml). The wheel's two dependencies come as wheels beside it, as an
# offline site gives them (here: python3 -m pip download -d .wheels --only-binary=:all: --python-version 3.12
# pyyaml nvidia-ml-py).
python3 -m venv "$work/venv"
"${hide[@]}" sh -c 'command -v nvcc' >/dev/null && echo "warning: an nvcc is still on PATH" | tee -a "$OUT/wheel.log"
t0=$(date +%s.%N)
"${hide[@]}" "$work/venv/bin/pip" install --no-index --find-links "$(dirname "$whl")" -q "$whl" >>"$OUT/wheel.log" 2>&1
rc_install=$?
t1=$(date +%s.%N)
install_s=$(python3 -c "print(round($t1 - $t0, 1))")
"$work/venv/bin/pip" check >>"$OUT/wheel.log" 2>&1; rc_check=$?
cd "$work"
"${hide[@]}" "$work/venv/bin/umscope" info --json > "$OUT/info.json" 2>>"$OUT/wheel.log"
t2=$(date +%s)
"${hide[@]}" timeout 900 "$work/venv/bin/umscope" run --quick --store "$work/q.sqlite" --report "$work/q.html" \
  --no-progress > "$OUT/quick.log" 2>&1
rc_quick=$?
quick_s=$(( $(date +%s) - t2 ))
tail -15 "$OUT/quick.log"
python3 - "$OUT/info.json" "$whl" "$install_s" "$rc_install" "$rc_check" "$rc_quick" "$quick_s" "$work" <<'PY'
import json, os, sys
info_path, whl, install_s, rc_i, rc_c, rc_q, quick_s, work = sys.argv[1:]
try:
    info = json.load(open(info_path))
except Exception as e:
    info = {"error": str(e)}
cuda = info.get("cuda") or {}
gpus = info.get("gpus") or []
print("\n=== wheel on the GPU machine ===")
rows = [("wheel", f"{os.path.basename(whl)} ({os.path.getsize(whl) / 1e6:.1f} MB)"),
        ("glibc", os.confstr("CS_GNU_LIBC_VERSION") + " (the wheel's tag needs "
         + ".".join(os.path.basename(whl).split("manylinux_")[1].split("_")[:2]) + " or newer)"),
        ("pip install", f"{install_s} s (exit {rc_i}); pip check exit {rc_c}"),
        ("umscope from", (cuda.get("tracer") or "")[:len(work)] == work and "the venv" or str(cuda.get("tracer"))),
        ("built_with_cuda", cuda.get("built_with_cuda")), ("runtime", cuda.get("runtime_version")),
        ("driver", cuda.get("driver")), ("GPU", gpus[0]["name"] if gpus else cuda.get("why_no_gpu")),
        ("tracer / cupti", f"{cuda.get('tracer')} / {cuda.get('cupti')}"), ("cublas", cuda.get("cublas")),
        ("run --quick", f"exit {rc_q} in {quick_s} s (tail of quick.log above)")]
for k, v in rows:
    print(f"{k:<16} {v}")
PY
