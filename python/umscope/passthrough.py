"""A child program run with its output passed through to ours as it comes and its end kept for the store
(place runs the program this way; profile tees the program's stderr the same way)."""

import signal
import subprocess
import sys
import threading

from umscope.errors import UsageError
from umscope.timing import Stopwatch

OUTPUT_KEEP = 64 * 1024  # bytes of each stream's end kept in the store


def tee(src, dst, keep):
    """Copies a child's stream to ours as it comes, keeping the last OUTPUT_KEEP bytes."""
    while True:
        chunk = src.read1(65536) if hasattr(src, "read1") else src.read(65536)
        if not chunk:
            break
        dst.write(chunk)
        dst.flush()
        keep += chunk
        if len(keep) > 2 * OUTPUT_KEEP:
            del keep[:-OUTPUT_KEEP]


def run_program(cmd, env):
    """Runs cmd with output passed through (and kept); returns (exit status as a shell reports it, stdout
    tail, stderr tail, wall seconds)."""
    sw = Stopwatch()
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (FileNotFoundError, PermissionError) as err:
        what = "command not found" if isinstance(err, FileNotFoundError) else "permission denied"
        raise UsageError(f"{what}: {cmd[0]}") from None
    out, err = bytearray(), bytearray()
    threads = [threading.Thread(target=tee, args=(proc.stdout, sys.stdout.buffer, out), daemon=True),
               threading.Thread(target=tee, args=(proc.stderr, sys.stderr.buffer, err), daemon=True)]
    for t in threads:
        t.start()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the program; we store what it did
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old)
    for t in threads:
        t.join()
    status = rc if rc >= 0 else 128 - rc
    return (status, out[-OUTPUT_KEEP:].decode(errors="replace"), err[-OUTPUT_KEEP:].decode(errors="replace"),
            sw.elapsed())
