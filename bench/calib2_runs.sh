#!/usr/bin/env bash
# The second calibration set's three runs (issue 39; validation.CALIB2, --set calib2: nine programs), on one GPU
# alone, from the repository root after `pip install --no-build-isolation .`: each run with the driver's fault
# events and each program's per-entry table kept (as the calib set's runs), the first kept as calib2, the two
# repeats as rep-calib2 and rep2-calib2 (the names data/sim-traces uses for the calib set's).
# Writes $OUT/calib2.tar.gz, $OUT/rep-calib2.tar.gz, $OUT/rep2-calib2.tar.gz (unpack with
# `tar -xzf FILE -C data/sim-traces`) and $OUT/<run>.log; prints each run's table of the driver's GPU faults, then
# a summary last. About 1-2 min a run on an H100 (the calib set's eight programs took about 15 s a run without
# the per-entry tables): 3-6 minutes in all.
# Then, on any machine (no GPU), the document with both calibration sets:
#   python3 bench/sim_validate.py <the command in docs/simulator-validation.md's header> \
#     --calib data/sim-traces/calib2 --repeat data/sim-traces/rep-calib2 --repeat data/sim-traces/rep2-calib2
set -uo pipefail
OUT=${OUT:-/tmp/calib2-out}; mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=()
for r in calib2 rep-calib2 rep2-calib2; do
  t0=$(date +%s)
  timeout 900 python3 bench/sim_validate.py --set calib2 --uvm-events --runs-only --keep "$work/$r" \
    > "$OUT/$r.log" 2>&1
  rc=$?
  s=$(( $(date +%s) - t0 ))
  [ -d "$work/$r" ] && tar -czf "$OUT/$r.tar.gz" -C "$work" "$r"
  sed -n '/^| program/,$p' "$OUT/$r.log"
  [ $rc -eq 0 ] || tail -5 "$OUT/$r.log"
  summary+=("| $r | $rc | $s | $(ls "$work/$r" 2>/dev/null | grep -c '\.counts\.json$') | $(du -h "$OUT/$r.tar.gz" 2>/dev/null | cut -f1) |")
done
echo
echo "| run | exit | s | programs kept (of 9) | tar |"
echo "| --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${summary[@]}"
