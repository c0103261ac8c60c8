"""Cases and the runner that executes them isolated, each with its own timeout.
A crash, a CUDA error, a refusal or a timeout is recorded with its reason and
the suite goes on; Ctrl-C keeps every completed case, and an interrupted run
can be resumed.

Consecutive cases run in one `umbench batch` process (the process and CUDA
context start, about 0.35 s on an H100 host, is paid once) with the isolation
of one process per case kept: each case has its own timeout, watched through
the batch's start/end markers; a case that hangs is killed with its process
and a case that crashes or fails ends it; either way only that case is lost
and the cases after it go on in a fresh batch. Families that measure a fresh
process's allocation and first-touch costs (ISOLATED) run one process per
case, as does everything with `isolate` set.

With the option `visible_gpus` "case" (`--visible-gpus case`), a case that uses GPU 0 alone runs with
CUDA_VISIBLE_DEVICES narrowed to that GPU (visible_gpus_of), so its process initialises CUDA for one GPU; a
batch process holds only cases with the same narrowing. An experiment: docs/method.md."""

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from umscope import conditions, energy, native
from umscope.timing import Stopwatch

PYTHON_RUNNERS = {"llm": "umscope.apps.llm"}

# Families whose figures are a fresh process's: allocation and first-touch costs (firsttouch), page faults on
# new memory (faults), the first GPU pass's migration (migration, interleave); and the ping-pong: on the H100,
# in a batch after the migrating managed CPU-GPU case, the GPU-GPU round trip was 694 ns (same SMs 124/126, same
# 1980 MHz) against 503 ns with one process per case or in a batch without that case. Their cases keep their
# own process; of the ping-pong, the managed cases (the ones that migrate pages) do, the others share a batch (each
# process start with its CUDA context cost about 1 s a case on the 4 x H100 node, 16 cases).
ISOLATED = {"firsttouch", "faults", "migration", "interleave"}
ISOLATED_KINDS = {"pingpong": ("managed",)}  # family: the kind names whose cases keep their own process

# Case parameters that name a second GPU or another rank's side.
_SECOND_GPU_PARAMS = ("peer", "gpus", "peer-kind", "peer_kind")

# The signals that interrupt a run: the run's status word for each, and umscope's exit status (128 + the signal, as
# a shell reports it). One table for the signal handlers, mark_interrupted's word and the CLI's exit status.
INTERRUPTIONS = {signal.SIGINT: "interrupted", signal.SIGHUP: "hangup", signal.SIGTERM: "terminated"}


def interrupted_exit(status: str) -> int:
    """The exit status of a run that ended with this status word (an unknown word: SIGINT's, 130)."""
    sig = next((s for s, w in INTERRUPTIONS.items() if w == status), signal.SIGINT)
    return 128 + int(sig)


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: a batch system's time limit and a closed SSH session end a run the
    way Ctrl-C does: the running case's process group is killed, completed cases are kept, the run is
    marked interrupted with its resume hint."""

    def __init__(self, signum=signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signal.Signals(signum)

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)


_critical = 0       # >0 while a case's result is being written: a signal then waits for the commit
_pending = []


def _on_signal(signum, _frame):
    if _critical:
        _pending.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def handle_signals():
    """SIGINT, SIGTERM and SIGHUP raise Interrupted while the block runs (main thread only)."""
    old = {}
    try:
        for s in INTERRUPTIONS:
            old[s] = signal.signal(s, _on_signal)
    except ValueError:  # not the main thread: leave the handlers alone
        pass
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred_signals():
    """A store write finishes before a signal ends the run, so no measured case is half-written."""
    global _critical
    _critical += 1
    try:
        yield
    finally:
        _critical -= 1
        if not _critical and _pending:
            signum = _pending.pop(0)
            _pending.clear()
            raise Interrupted(signum)


@dataclass
class Case:
    benchmark: str
    kind: str = None
    params: dict = field(default_factory=dict)
    timeout: float = 180.0
    launch: list = None  # a site launcher's argv (mpirun -n 2 ...): the case runs as umbench-mpi ranks
    skip: str = None  # the plan knows it will be skipped, and why (plans.known_skip): stored without a process

    @property
    def case_id(self) -> str:
        parts = [self.benchmark]
        if self.kind:
            parts.append(self.kind)
        parts += [f"{k}={v}" for k, v in sorted(self.params.items())]
        return " ".join(parts)

    def argv(self, options: dict) -> list:
        if self.benchmark in PYTHON_RUNNERS:  # a Python application (PyTorch), same records and status line
            args = [sys.executable, "-m", PYTHON_RUNNERS[self.benchmark]]
        elif self.launch:  # one rank per GPU under the site's launcher (scale-out)
            args = list(self.launch) + [native.umbench_mpi_path(), "run", self.benchmark]
        else:
            args = [native.umbench_path(), "run", self.benchmark]
        if self.kind:
            args += ["--kind", self.kind]
        # The user's --reps/--warmup win over the plan's own values; --device/--placement fill in where the
        # case names none (--devices gives each case its own GPU).
        given = {k: options[k] for k in ("reps", "warmup") if options.get(k) is not None}
        for k, v in self.params.items():
            if k not in given:
                args += [f"--{k}", str(v)]
        for k, v in given.items():
            args += [f"--{k}", str(v)]
        for k in ("device", "placement"):
            if options.get(k) is not None and k not in self.params:
                args += [f"--{k}", str(options[k])]
        for flag in ("allow_oversubscription", "allow_host_overcommit"):
            if options.get(flag):
                args.append("--" + flag.replace("_", "-"))
        return args

    def own_family_process(self, options: dict) -> bool:
        """Whether every case like this one keeps its own process (--isolate, a launcher's ranks, a Python
        runner, a family in ISOLATED), so that no batch may span it."""
        return bool(options.get("isolate") or self.launch or self.benchmark in PYTHON_RUNNERS
                    or self.benchmark in ISOLATED)

    def batchable(self, options: dict) -> bool:
        """Whether this case may share a umbench batch process with its neighbours."""
        if self.skip or self.own_family_process(options):
            return False
        if native.kind_name(self.kind) in ISOLATED_KINDS.get(self.benchmark, ()):
            return False
        return not any(("\t" in a or "\n" in a) for a in self.argv(options)[2:])

    def to_json(self) -> dict:
        d = {"benchmark": self.benchmark, "kind": self.kind, "params": self.params, "timeout": self.timeout}
        if self.launch:
            d["launch"] = list(self.launch)
        if self.skip:
            d["skip"] = self.skip
        return d

    @classmethod
    def from_json(cls, d) -> "Case":
        return cls(d["benchmark"], d.get("kind"), dict(d.get("params") or {}), d.get("timeout", 180.0), d.get("launch"),
                   d.get("skip"))


@dataclass
class Outcome:
    status: str  # ok, skipped, failed, refused, timeout
    reason: str
    records: list
    elapsed: float
    pids: tuple = ()  # the runner processes that were on the GPU for this case (a batch: its one process)
    energy: tuple = None  # (snapshot before, snapshot after, what the window holds): energy.Meter's readings


# What a case's energy window holds (energy.window's `window`).
WINDOW_PROCESS = "its own process, from before it started to after it ended: includes the process start and CUDA context"
WINDOW_BATCH_FIRST = ("the first case of a batch process, start to end marker: includes the CUDA context's creation, "
                      "not the process start")
WINDOW_BATCH = "a case inside a batch process, start to end marker: no process or context start"
WINDOW_LOST = "from the batch's previous marker to the kill: the case's start marker never came"


def execute(case: Case, options: dict, meter=None) -> Outcome:
    """Runs one case in its own process group, so a timeout kills all of it. With an energy.Meter, the
    outcome carries its readings from before the process started to after it ended."""
    before = meter.snapshot() if meter else None
    outcome = _execute_one(case, options)
    if meter:
        outcome.energy = (before, meter.snapshot(), WINDOW_PROCESS)
    return outcome


def _execute_one(case: Case, options: dict) -> Outcome:
    sw = Stopwatch()
    # umbench kills itself when this process dies (PR_SET_PDEATHSIG), and exits at once if it finds
    # another parent than this pid (this process died before it could ask).
    # (Ranks started by a site launcher have the launcher as parent: they only get PR_SET_PDEATHSIG.)
    proc = subprocess.Popen(case.argv(options), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=_case_env(case, options))
    try:
        out, err = proc.communicate(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        records, _ = native.parse_output(out)
        return Outcome("timeout", f"killed after its {case.timeout:g} s timeout", records, sw.elapsed())
    except BaseException:
        _kill(proc)
        with deferred_signals():
            proc.communicate()
        raise
    records, status = native.parse_output(out)
    elapsed = sw.elapsed()
    rc = proc.returncode
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return Outcome("failed", f"umbench died of {name}" + _tail(err), records, elapsed)
    if status is None:
        return Outcome("failed", f"umbench exited {rc} without a status line" + _tail(err), records, elapsed)
    st = status["status"]
    if st == "usage":
        st = "failed"
    return Outcome(st, status.get("reason", ""), records, elapsed)


def visible_gpus_of(case: Case, options: dict, environ=None):
    """The CUDA_VISIBLE_DEVICES a case's process gets under `visible_gpus` "case", or None (its environment's
    own, as under "all"). A case qualifies when it uses exactly one GPU, GPU 0 of the suite's numbering (the
    default device): not under a launcher, no collective or MPI family, no GPU-GPU ping-pong, no parameter or
    kind naming a second GPU (peer:N, --peer, --gpus). That GPU is the first entry of the user's own
    CUDA_VISIBLE_DEVICES where set (GPU 0 as the suite sees it), else "0": inside the process it is still
    device 0, so no record needs relabelling, and the parent's NVML readings (energy, conditions) name the GPU
    they named before. An empty first entry (no GPU visible) is left as it is. Which GPUs a case uses is
    energy.gpus_of's answer (every GPU for launched ranks and the collectives)."""
    if options.get("visible_gpus") != "case":
        return None
    if case.params.get("pair") == "gpu-gpu" or any(k in case.params for k in _SECOND_GPU_PARAMS):
        return None
    if energy.gpus_of(case, options) != {0}:
        return None
    user = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if user is None:
        return "0"
    return user.split(",")[0].strip() or None


def _case_env(case: Case, options: dict) -> dict:
    """The environment of a case's process: umbench checks its parent (UMSCOPE_PARENT_PID) unless a site
    launcher starts it; CUDA_VISIBLE_DEVICES narrowed where visible_gpus_of says."""
    env = dict(os.environ) if case.launch else dict(os.environ, UMSCOPE_PARENT_PID=str(os.getpid()))
    narrowed = visible_gpus_of(case, options)
    if narrowed is not None:
        env["CUDA_VISIBLE_DEVICES"] = narrowed
    return env


def _reader(stream, q, meter=None):
    """Each line of the batch's output, with the meter's reading taken as a case marker arrives (not when
    the suite gets to it: by then the batch may be well into the next case). A start marker that comes right
    after an end marker (umbench prints it microseconds later, nothing between) shares that marker's reading:
    one reading of every GPU per boundary between two cases instead of two (on 4 x H100 each reading is 12
    NVML calls)."""
    last_end = None  # the reading of the end marker just before, while no other line came after it
    try:
        for line in stream:
            reading = None
            if meter and line.startswith('{"type":"case"'):
                start = '"event":"start"' in line
                reading = last_end if start and last_end is not None else meter.snapshot()
                last_end = None if start else reading
            else:
                last_end = None
            q.put((line, reading))
    except (ValueError, OSError):  # the suite closed the pipe while a reading ran (a signal ended the run)
        pass
    q.put((None, None))  # the end of the output: the suite reads the meter itself where it needs a reading


def execute_batch(cases: list, options: dict, on_start=None, meter=None):
    """Runs `cases` in `umbench batch` processes; yields (case, Outcome) as each ends, in order.
    on_start(case) is called when a case starts. A case that passes its timeout is killed with its process,
    one that crashes or fails ends the process; the cases after it go on in a new batch. With an
    energy.Meter, each outcome carries its readings at the case's start and end markers. One process holds
    only cases with the same environment (visible_gpus_of): at a change, the next cases go on in a new one."""
    i = 0
    while i < len(cases):
        rest = cases[i:]
        narrowed = visible_gpus_of(rest[0], options)
        rest = rest[:next((k for k, c in enumerate(rest) if visible_gpus_of(c, options) != narrowed), len(rest))]
        stamp = meter.snapshot() if meter else None  # the meter's reading at the last marker
        started_in = None  # the index of the first case this process started

        def to_now(before, where):
            return (before, meter.snapshot(), where) if meter else None

        proc = subprocess.Popen([native.umbench_path(), "batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True, env=_case_env(rest[0], options))
        out_q, err_lines = queue.Queue(), []
        threads = [threading.Thread(target=_reader, args=(proc.stdout, out_q, meter), daemon=True),
                   threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)]
        for t in threads:
            t.start()
        j, case, clock, lines, err_at = -1, None, None, [], 0  # clock: the case's, from its start marker
        where = WINDOW_BATCH
        try:
            try:  # umbench reads every line before it starts: no deadlock with its output
                proc.stdin.write("".join("\t".join(c.argv(options)[2:]) + "\n" for c in rest))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            while True:
                if case is not None:
                    wait = max(0.0, case.timeout - clock.elapsed())
                else:  # the batch starts (or moves on to) the next case well within that case's timeout
                    wait = rest[j + 1].timeout if j + 1 < len(rest) else 60.0
                try:
                    line, reading = out_q.get(timeout=wait)
                except queue.Empty:
                    _kill(proc)
                    proc.wait()
                    if case is None:  # hung between cases (or at the end): the next case is lost to it
                        if j + 1 >= len(rest):
                            break
                        j += 1
                        case, clock, lines, where = rest[j], Stopwatch(already=wait), [], WINDOW_LOST
                    records, _ = native.parse_output("".join(lines))
                    yield case, Outcome("timeout", f"killed after its {case.timeout:g} s timeout", records,
                                        clock.elapsed(), (proc.pid,), to_now(stamp, where))
                    case = None
                    break
                if line is None:  # the process ended
                    proc.wait()
                    if case is not None:  # inside a case: a crash
                        rc = proc.returncode
                        if rc < 0:
                            try:
                                why = f"umbench died of {signal.Signals(-rc).name}"
                            except ValueError:
                                why = f"umbench died of signal {-rc}"
                        else:
                            why = f"umbench exited {rc} without a status line"
                        for t in threads:
                            t.join(timeout=5)
                        records, _ = native.parse_output("".join(lines))
                        yield case, Outcome("failed", why + _tail("".join(err_lines[err_at:])), records,
                                            clock.elapsed(), (proc.pid,), to_now(stamp, where))
                        case = None
                    elif j < 0:  # no case started (an umbench without `batch`?): one process per case
                        for c in rest:
                            if on_start:
                                on_start(c)
                            yield c, execute(c, options, meter)
                        j = len(rest) - 1
                    break
                text = line.strip()
                if text.startswith('{"type":"case"'):
                    marker = json.loads(text)
                    if marker.get("event") == "start":
                        j = marker["index"]
                        case, clock, lines, err_at = rest[j], Stopwatch(), [], len(err_lines)
                        started_in = j if started_in is None else started_in
                        where = WINDOW_BATCH_FIRST if j == started_in else WINDOW_BATCH
                        stamp = reading
                        if on_start:
                            on_start(case)
                    elif marker.get("event") == "end" and case is not None:
                        records, status = native.parse_output("".join(lines))
                        elapsed = clock.elapsed()
                        window = (stamp, reading, where) if meter else None
                        stamp = reading
                        if status is None:
                            outcome = Outcome("failed", f"umbench exited {marker.get('exit')} without a status "
                                              "line" + _tail("".join(err_lines[err_at:])), records, elapsed,
                                              (proc.pid,), window)
                        else:
                            st = "failed" if status["status"] == "usage" else status["status"]
                            outcome = Outcome(st, status.get("reason", ""), records, elapsed, (proc.pid,), window)
                        done, case = case, None
                        yield done, outcome
                    continue
                lines.append(line)
        except BaseException:
            _kill(proc)
            with deferred_signals():
                proc.wait()
            raise
        finally:
            for f in (proc.stdout, proc.stderr):
                with contextlib.suppress(Exception):
                    f.close()
        i += j + 1


def _segments(cases: list, options: dict):
    """Consecutive batchable cases as one list; every other case alone. Under `visible_gpus` "case" a stretch
    of the plan is grouped by environment (visible_gpus_of), each group keeping its cases' order, so that a
    batch process is started once per environment and not at every change: on 4 x H100 (b7b9039) the copy
    family alternated GPU-0 and peer cases, and the 4-GPU run spent 24.5 s between cases, most of it starting
    processes, against 5.4 s with every GPU visible. A stretch runs up to a case of a family whose every case
    keeps its own process (ISOLATED, a Python runner, a launcher's ranks); the cases inside it that keep
    their own process (ISOLATED_KINDS: the managed ping-pongs) run alone after its groups, so they no longer
    split it: on 4 x H100 (b447ae0) they split the ping-pong family into three GPU-0 and two 4-GPU batch
    processes, whose starts took 0.27-0.28 s and 1.01-1.08 s each before their first case."""
    if options.get("visible_gpus") != "case":
        run = []
        for c in cases:
            if c.batchable(options):
                run.append(c)
                continue
            if run:
                yield run
                run = []
            yield [c]
        if run:
            yield run
        return

    def stretch_segments(stretch):
        by_env, alone = {}, []
        for c in stretch:
            if c.batchable(options):
                by_env.setdefault(visible_gpus_of(c, options), []).append(c)
            else:
                alone.append([c])
        return list(by_env.values()) + alone

    stretch = []
    for c in cases:
        if c.own_family_process(options):
            yield from stretch_segments(stretch)
            stretch = []
            yield [c]
        else:
            stretch.append(c)
    yield from stretch_segments(stretch)


def _tail(err: str) -> str:
    err = (err or "").strip()
    return f": {err.splitlines()[-1][:300]}" if err else ""


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Progress:
    """One line per case, with a bar, on stderr."""

    def __init__(self, total: int, enabled=True, stream=None):
        self.total, self.done, self.enabled = total, 0, enabled
        self.stream = stream or sys.stderr

    def start(self, case: Case):
        if self.enabled and self.stream.isatty():
            self.stream.write(f"\r{self._bar()} {case.case_id[:70]} ...")
            self.stream.flush()

    def finish(self, case: Case, outcome: Outcome):
        self.done += 1
        if not self.enabled:
            return
        best = ""
        for r in outcome.records:
            if r.get("median") is not None:
                best = f" {r.get('op', '')} {r['median']:.4g} {r.get('unit', '')}".rstrip()
                break
        reason = f" ({outcome.reason[:90]})" if outcome.status != "ok" else best
        line = f"{self._bar()} {case.case_id[:70]}: {outcome.status}{reason} [{outcome.elapsed:.1f} s]"
        self.stream.write(("\r\033[K" if self.stream.isatty() else "") + line + "\n")
        self.stream.flush()

    def _bar(self, width=20):
        filled = width * self.done // max(self.total, 1)
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done:>3}/{self.total}"


def bus_ids_of(fingerprint) -> list:
    """The PCI bus id of each CUDA device of a probe's fingerprint, indexed by the CUDA ordinal (None where the
    probe gave none): what run_cases reads NVML through."""
    gpus = {g.get("device"): g.get("pci_bus_id") for g in (fingerprint or {}).get("gpus") or []
            if isinstance(g.get("device"), int) and g.get("device") >= 0}
    return [gpus.get(d) for d in range(max(gpus) + 1)] if gpus else []


def run_cases(store, run_id: int, cases: list, options: dict, progress=True, annotate=None, bus_ids=None) -> str:
    """Runs the cases of run `run_id` not yet done; returns the run's final status.
    `annotate(records)` may add fields (bounds) to each case's records before they are stored. bus_ids: the
    PCI bus id of each CUDA device, in CUDA's order (the probe's `gpus`): the readings around a case (energy,
    conditions) are of the GPU the case ran on, found by its bus id (NVML's own numbering can differ)."""
    done = store.done_cases(run_id)
    todo = [c for c in cases if c.case_id not in done]
    bar = Progress(len(cases), enabled=progress)
    bar.done = len(cases) - len(todo)

    def device_of(case):
        return int(case.params.get("device", options.get("device") or 0))

    def read_conditions(case):
        d = device_of(case)
        return conditions.read(d, bus_ids[d] if bus_ids and 0 <= d < len(bus_ids) else None)

    running = []  # the case started and not yet stored (named if a signal ends the run)
    meter = None
    try:
        store.set_run_status(run_id, "running")
        # inside the try: a signal while NVML starts is an interruption like any other
        meter = energy.Meter(bus_ids=bus_ids).start()
        for segment in _segments(todo, options):
            starts = {}
            # In a batch, the reading after one case is the reading before the next on the same GPU: umbench
            # starts the next case as it ends one, so the reading the suite takes as it gets the end marker is
            # the nearer one (a reading is 8 NVML calls on the case's GPU).
            after_last = {}

            def on_start(case):
                bar.start(case)
                running[:] = [case.case_id]
                before = after_last.pop(device_of(case), None)
                starts[id(case)] = (time.time(), before or read_conditions(case))

            if segment[0].skip:  # known before it starts (plans.known_skip): no process, no readings
                case, outcome = segment[0], Outcome("skipped", segment[0].skip, [], 0.0)
                bar.start(case)
                with deferred_signals():
                    store.add_case_result(run_id, case, outcome.status, outcome.reason, time.time(), 0.0, [])
                bar.finish(case, outcome)
                continue
            if segment[0].batchable(options):
                outcomes = execute_batch(segment, options, on_start, meter=meter)
            else:
                on_start(segment[0])
                outcomes = iter([(segment[0], execute(segment[0], options, meter=meter))])
            for case, outcome in outcomes:
                started, before = starts.pop(id(case), (time.time() - outcome.elapsed, None))
                if before is None:  # it never started (its batch hung before it): no reading from before
                    before = read_conditions(case)
                # A batch's own process holds its CUDA context between cases: not another user of the GPU.
                after = read_conditions(case)
                conditions.attach(outcome.records, before, after, outcome.pids)
                after_last.clear()
                after_last[device_of(case)] = after
                used = energy.window(*outcome.energy[:2], energy.gpus_of(case, options), outcome.energy[2]) \
                    if outcome.energy else None
                energy.attach(outcome.records, used)
                extra = {"energy": used} if used else {}
                narrowed = visible_gpus_of(case, options)
                if narrowed is not None:  # every record of the case says it saw one GPU (--visible-gpus case)
                    extra["visible_gpus"] = narrowed
                    for r in outcome.records:
                        r["visible_gpus"] = narrowed
                with deferred_signals():
                    if annotate:
                        annotate(outcome.records)
                    store.add_case_result(run_id, case, outcome.status, outcome.reason, started, outcome.elapsed,
                                          outcome.records, extra or None)
                    if running == [case.case_id]:
                        running.clear()
                bar.finish(case, outcome)
        if meter:
            meter.stop()
            meter = None
        # Every mode of an application against its explicit mode, and every case of a kernel that failed its
        # reference check failed with it, over the whole run (so a resumed run too). Inside the try: a signal
        # here leaves the run interrupted, as the exit status says, and its resume applies the checks (it was
        # left "running" with exit status 130, seen once in CI).
        from umscope import verify
        for case_id, reason in verify.apply_checks(store, run_id).items():
            if progress:
                sys.stderr.write(f"{case_id}: failed ({reason})\n")
        with deferred_signals():  # a signal during the write: the run is then marked interrupted below
            store.finish_run(run_id, "complete")
        return "complete"
    except KeyboardInterrupt as e:
        return mark_interrupted(store, run_id, getattr(e, "signum", signal.SIGINT), running[0] if running else None)
    finally:
        if meter:
            meter.stop()


def mark_interrupted(store, run_id: int, signum, case_id=None) -> str:
    """Marks run `run_id` interrupted by `signum` (with the case then running), says how to resume it; returns
    the run's status word (hangup, terminated, interrupted)."""
    signum = signal.Signals(signum)
    with deferred_signals():
        store.finish_run(run_id, "interrupted")
        store.note_interruption(run_id, signum.name, case_id)
        try:  # after SIGHUP the terminal may be gone
            sys.stderr.write(f"\ninterrupted by {signum.name}: completed cases are kept; "
                             f"`umscope run --resume {run_id}` finishes run {run_id}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    return INTERRUPTIONS.get(signum, "interrupted")


def plan_to_json(cases: list) -> list:
    return [c.to_json() for c in cases]


def plan_from_json(items: list) -> list:
    return [Case.from_json(d) for d in items]


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
