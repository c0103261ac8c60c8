#!/usr/bin/env bash
# The third calibration set's three runs (issue 39, session 20; validation.CALIB3, --set calib3: six programs, the
# migration kernel on many blocks: reads on 84, 176, 376 and 792 blocks, writes on 400 and 792), on one GPU alone, from
# the repository root after `pip install --no-build-isolation .`: each run with the driver's fault events and each
# program's per-entry table kept (as the calib and calib2 sets' runs), the first kept as calib3, the two repeats as
# rep-calib3 and rep2-calib3 (the names data/sim-traces uses for the other calibration sets').
# Writes $OUT/calib3.tar.gz, $OUT/rep-calib3.tar.gz, $OUT/rep2-calib3.tar.gz (unpack with
# `tar -xzf FILE -C data/sim-traces`) and $OUT/<run>.log; prints each run's table of the driver's GPU faults, then
# a summary last. GPU time: calib2's nine programs took 21-22 s a run on an H100 (session 15), about 2.4 s a program;
# these six, 512 MiB each as every set's, about 15 s a run: under a minute for the three (each run is cut at 100 s,
# so the three stay under 5 minutes whatever happens).
# Then, on any machine (no GPU), the document with the three calibration sets:
#   python3 bench/sim_validate.py <the command in docs/simulator-validation.md's header> \
#     --calib data/sim-traces/calib3 --repeat data/sim-traces/rep-calib3 --repeat data/sim-traces/rep2-calib3
set -uo pipefail
OUT=${OUT:-/tmp/calib3-out}; mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=$(python3 -c 'from umscope.model.validation import CALIB3; print(len(CALIB3))') || exit 1
summary=()
for r in calib3 rep-calib3 rep2-calib3; do
  t0=$(date +%s)
  timeout 100 python3 bench/sim_validate.py --set calib3 --uvm-events --runs-only --keep "$work/$r" \
    > "$OUT/$r.log" 2>&1
  rc=$?
  s=$(( $(date +%s) - t0 ))
  [ -d "$work/$r" ] && tar -czf "$OUT/$r.tar.gz" -C "$work" "$r"
  sed -n '/^| program/,$p' "$OUT/$r.log"
  [ $rc -eq 0 ] || tail -5 "$OUT/$r.log"
  summary+=("| $r | $rc | $s | $(ls "$work/$r" 2>/dev/null | grep -c '\.counts\.json$') | $(ls "$work/$r" 2>/dev/null | grep -c '\.entries\.txt\.gz$') | $(du -h "$OUT/$r.tar.gz" 2>/dev/null | cut -f1) |")
done
echo
echo "| run | exit | s | programs kept (of $n) | entry tables | tar |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${summary[@]}"
