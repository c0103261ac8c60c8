"""Fuzz: generated invocations of every command and option (numbers at the limits, non-numbers, empty,
unicode, paths that are directories, devices, missing or read-only). Each must end with the documented
exit code (2 for a bad value, 0 for good ones with a runner that measures nothing) and, on error, one
clear line on stderr, never a traceback. Most run main() in-process with a no-op runner (the validation
under test is all before the runner); a smaller sample runs the real entry point and umbench on CPU
cases. About 30 s on 2 cores."""

import io
import os
import random
import stat
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import run_cli, umbench
from umscope import cli, probe, suite, validate
from umscope.apps import APPS
from umscope.report import html as report_html

N_INPROCESS = 1100
HUGE = ["1e400", "nan", "inf", "-inf", "1e20", str(2**63), str(2**64), "99999999999999999999999", "-1", "0"]
JUNK = ["", " ", ",", ",,", "abc", "1,,2", "ä", "١٢", "\x1b[31mred", "1e", "--", "0x10", "1 2", "☃" * 40]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    store = d / "store.sqlite"
    ro_file = d / "readonly.html"
    ro_file.write_text("x")
    ro_file.chmod(stat.S_IRUSR)
    ro_dir = d / "rodir"
    ro_dir.mkdir()
    ro_dir.chmod(stat.S_IRUSR | stat.S_IXUSR)
    (d / "adir").mkdir()
    return {"dir": d, "store": str(store), "good_out": str(d / "out" / "report.html"),
            "bad_paths": [str(d / "adir"), "/dev/full", "/proc/self/status", "/proc/nope/x.html", "/sys/x",
                          str(ro_file) if os.geteuid() != 0 else "/dev/null",
                          str(ro_dir / "x.html") if os.geteuid() != 0 else "/proc/version", "", "/dev/null"],
            "missing_store": str(d / "no" / "such" / "store.sqlite")}


def _options(rng, e):
    """(option, good values, bad values) for the run-creating commands."""
    return [
        ("--reps", ["1", "3", str(validate.MAX_REPS)], HUGE[:9] + JUNK + [str(validate.MAX_REPS + 1)]),
        ("--warmup", ["0", "2"], HUGE[:9] + JUNK),
        ("--timeout", ["0.5", "60", "1800", str(int(validate.MAX_TIMEOUT))], HUGE + JUNK),
        ("--device", ["0"], ["-1", "1024", str(2**63)] + JUNK),
        ("--report", [e["good_out"]], e["bad_paths"]),
        ("--label", ["a label", "\x1b]0;x\x07", "ü" * 10], []),
        ("--machine", ["h100-sxm-pcie5"], ["", "/dev/zero", "/dev/full", str(e["dir"] / "adir"), "no-such-machine"]),
        ("--store", [e["store"]], ["", str(e["dir"] / "adir"), "/dev/null", "/proc/self"]),
    ]


BENCH = {
    "--size": (["4g", "4GB", "4gB", "4GiB", "4gb", "4gib", "64M", "1e6", "4096,8192"],
               ["", ",", "1e400", "nan", "inf", str(2**64), "2e15G", "-1", "0", "1.5", "abc", "4 parsecs", "4G,,8G",
                "ä"]),
    "--threads": (["1", "all", "1,all", "2,1"], ["", ",", "0", "-1", "99999", str(2**63), "abc", "1,,2", "nan",
                                                  "1.5", "ä", "alll"]),
    "--ops": (None, ["", ",", "bogus", "read,,copy", "ä", "READ"]),
    "--mode": (["ok", "ok,ok", "skip"], ["", ",", "bogus", "ok,,skip", "\x1b[2J"]),
    "--iterations": (["1", "20"], HUGE[:9] + JUNK + ["1000001"]),
    "--dos": (["0.5", "0.25,0.9"], ["nan", "inf", "-1", "0", "abc", "", ",", "1e400", "2", "17"]),
    "--available": (["8G", "512m"], ["", "abc", "1e400", "nan", "-1", "0"]),
    "--kind": (["system", "pinned"], ["bogus", "numa:" + "9" * 20, "numa:", "", "managed,prefetch=x"]),
}
FAMILY_OPS = {"cpu-stream": ["read", "read,copy", "write"], "gpu-stream": ["read", "triad"]}
FAMILIES = ["selftest", "cpu-stream", "gpu-stream", "latency", "pingpong", "faults", "firsttouch", "interleave",
            "oversub", "migration", "contention"]

APP = {
    "--footprint": (["64M", "1g"], ["", "abc", "1e400", "nan", "-5", "0", "4 GB GB"]),
    "--iterations": (["1", "5"], HUGE[:9] + JUNK),
    "--seed": (["0", "7"], ["-1", str(2**63), "abc", ""]),
    "--threads": (["1", "all"], ["", ",", "0", "99999", "abc"]),
    "--mode": (["explicit", "managed", "all"], ["", "bogus", "ä"]),
}
APP_ONLY = {
    "qv": {"--qubits": (["2", "20"], ["1", "41", "-1", str(2**64), "abc", ""]),
           "--precision": (["complex64"], ["fp16", "", "x"]), "--depth": (["3"], ["0", "100001", "x"])},
    "gemm": {"--precision": (["fp64", "tf32"], ["complex64", "", "fp8", ","]), "--n": (["64"], ["0", "-3", "x"]),
             "--variant": (["cublas", "panels"], ["", "x"]), "--place-a": (["pinned"], ["bogus", ""])},
    "himeno": {"--size": (["S"], ["XXL", "", "s"]), "--dims": (["3,3,3"], ["1,2", "a,b,c", "3,3,99999999"])},
    "srad": {"--lambda": (["0.5"], ["nan", "inf", "0", "-1", "x", ""])},
    "bfs": {"--nodes": (["100"], ["0", "x"]), "--degree": (["4"], ["0", str(2**40)])},
}


def _gen(rng, e):
    """One invocation: (argv, expected exit code)."""
    bad = False
    pick = rng.random()
    common = _options(rng, e)

    def add_common(argv, n):
        nonlocal bad
        for opt, good, badv in rng.sample(common, n):
            if badv and rng.random() < 0.5:
                argv += [opt, rng.choice(badv)]
                bad = True
            else:
                argv += [opt, rng.choice(good)]

    if pick < 0.45:
        fam = rng.choice(FAMILIES)
        argv = ["bench", fam, "--store", e["store"]]
        for opt in rng.sample(sorted(BENCH), rng.randint(1, 3)):
            good, badv = BENCH[opt]
            if opt == "--ops":
                good = FAMILY_OPS.get(fam)
            if good is None or rng.random() < 0.5:
                argv += [opt, rng.choice(badv)]
                bad = True
            else:
                argv += [opt, rng.choice(good)]
        add_common(argv, rng.randint(0, 2))
        if rng.random() < 0.5:
            argv.append("--dry-run")
        return argv, 2 if bad else 0
    if pick < 0.65:
        name = rng.choice(sorted(APP_ONLY) + ["triad", "hotspot"])
        argv = ["app", "run", name, "--store", e["store"], "--dry-run"]
        table = dict(APP)
        table.update(APP_ONLY.get(name, {}))
        for opt in rng.sample(sorted(table), rng.randint(1, 3)):
            good, badv = table[opt]
            if (name == "qv" and opt in ("--footprint", "--iterations")) or (name == "bfs" and opt == "--iterations"):
                continue
            if rng.random() < 0.5:
                argv += [opt, rng.choice(badv)]
                bad = True
            else:
                argv += [opt, rng.choice(good)]
        add_common(argv, rng.randint(0, 2))
        return argv, 2 if bad else 0
    if pick < 0.72:
        argv = ["run", "--store", e["store"]]
        v = rng.choice(["", " ", "abc", "0", "-1", str(2**63), str(2**64), "1e3", "ä", "999999"])
        argv += ["--resume", v]
        return argv, 2
    if pick < 0.87:
        cmd = rng.choice(["report", "export", "runs"])
        argv = [cmd]
        store = e["store"]
        r = rng.random()
        if r < 0.3:
            store, bad = rng.choice([e["missing_store"], str(e["dir"] / "adir"), "/dev/null", "/proc/self"]), True
        argv += ["--store", store]
        if cmd != "runs" and rng.random() < 0.5:
            argv += ["--run", rng.choice(["", "abc", "0", "-3", str(2**63), str(2**64), "1e2", "ä"])]
            bad = True
        if cmd != "runs" and rng.random() < 0.5:
            argv += ["-o", rng.choice(e["bad_paths"])]
            bad = True
        return argv, 2 if bad else 0
    if pick < 0.95:
        return ["profile", "--store", e["store"], "--period",
                rng.choice(["1e21s", "0", "0ms", "nan", "inf", "", "abc", "-1s", "1e400", "0.0001ms", "99999999s",
                            "3601s"]), "--", "true"], 2
    argv = rng.choice([["list", "--bogus"], ["info", "--bogus"], ["runs", "--json", "x"], ["bench"], ["app"],
                       ["app", "run"], ["app", "run", "nope"],
                       ["bench", "nope"], ["export", "--format", "xml"], ["frobnicate"], ["run", "--reps"],
                       ["bench", "selftest", "--size"]])
    return argv, 2


def _prime_store(path):
    """A store with one run, so report/export/runs have something to read."""
    rc, _, err = _call(["bench", "selftest", "--store", path, "--no-progress"])
    assert rc == 0, err


def _call(argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_fuzz_in_process(env, monkeypatch):
    fp = probe.probe()
    monkeypatch.setattr(probe, "probe", lambda: fp)

    def no_op(case, options, meter=None):
        return suite.Outcome("ok", "", [], 0.0)

    def no_op_batch(cases, options, on_start=None, meter=None):  # the batch runner's path: nothing runs either
        for c in cases:
            if on_start:
                on_start(c)
            yield c, suite.Outcome("ok", "", [], 0.0)

    _prime_store(env["store"])
    monkeypatch.setattr(suite, "execute", no_op)
    monkeypatch.setattr(suite, "execute_batch", no_op_batch)
    monkeypatch.setattr(report_html, "write_report", lambda store, run_id, path=None: _tiny_report(store, path))
    rng = random.Random(14)
    failures, counts = [], {0: 0, 2: 0}
    for i in range(N_INPROCESS):
        argv, want = _gen(rng, env)
        try:
            rc, out, err = _call(argv)
        except SystemExit as e:  # argparse --help/--version only: not generated
            failures.append((argv, f"SystemExit {e.code}"))
            continue
        except BaseException as e:  # noqa: BLE001 - a traceback is the defect under test
            failures.append((argv, f"{type(e).__name__}: {e}"))
            continue
        counts[rc] = counts.get(rc, 0) + 1
        if rc != want:
            failures.append((argv, f"exit {rc}, expected {want}: {err.strip()[-300:]}"))
        elif rc == 2:
            lines = err.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("umscope: error:") or "\x1b" in lines[0]:
                failures.append((argv, f"stderr not one clear line: {err!r}"[:400]))
    assert not failures, f"{len(failures)} of {N_INPROCESS}:\n" + "\n".join(f"{a!r}: {w}" for a, w in failures[:25])
    assert counts[0] > 100 and counts[2] > 500, counts  # both outcomes are exercised


def _tiny_report(store, path):
    out = Path(path) if path else store.path.parent / "reports" / "r.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("<html></html>")
    return out


# The real entry point and the real runner, CPU cases only.
SUBPROCESS = [
    (["bench", "cpu-stream", "--kind", "system", "--size", "4m", "--threads", "1", "--ops", "read", "--reps", "2"], 0),
    (["bench", "cpu-stream", "--size", "1e400"], 2),
    (["bench", "cpu-stream", "--size", ""], 2),
    (["bench", "cpu-stream", "--size", str(2**64)], 2),
    (["bench", "cpu-stream", "--threads", ""], 2),
    (["bench", "cpu-stream", "--threads", ","], 2),
    (["bench", "cpu-stream", "--threads", "99999"], 2),
    (["bench", "cpu-stream", "--ops", "bogus"], 2),
    (["bench", "cpu-stream", "--timeout", "nan"], 2),
    (["bench", "cpu-stream", "--timeout", "inf"], 2),
    (["bench", "cpu-stream", "--timeout", "1e20"], 2),
    (["bench", "oversub", "--dos", "abc"], 2),
    (["bench", "oversub", "--dos", "nan"], 2),
    (["bench", "selftest", "--mode", "ok,ok"], 0),
    (["bench", "selftest", "--mode", "fail"], 1),
    (["bench", "selftest", "--report", "/dev/full"], 2),
    (["bench", "selftest", "--report", "/proc/self/x.html"], 2),
    (["app", "run", "triad", "--processor", "cpu", "--footprint", "abc"], 2),
    (["app", "run", "triad", "--processor", "cpu", "--threads", ""], 2),
    (["app", "run", "gemm", "--precision", "fp8"], 2),
    (["app", "run", "qv", "--qubits", "99"], 2),
    (["run", "--resume", ""], 2),
    (["run", "--resume", str(2**63)], 2),
    (["report", "--run", str(2**64)], 2),
    (["profile", "--period", "1e21s", "--", "true"], 2),
]


@pytest.mark.parametrize("argv,want", SUBPROCESS)
def test_fuzz_entry_point(argv, want, tmp_path):
    store = str(tmp_path / "s.sqlite")
    res = run_cli(*argv, "--store", store, timeout=120) if argv[0] != "profile" else \
        run_cli("profile", "--store", store, *argv[1:], timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == want, res.stderr
    if want == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("umscope: error:"), res.stderr
        assert not (tmp_path / "s.sqlite").exists() or argv[0] == "report", "a run was created for bad input"


# umbench checks again: a bad value is exit 2 with its status line, never a crash or a hang.
NATIVE = [
    ["cpu-stream", "--threads", ""], ["cpu-stream", "--threads", ","], ["cpu-stream", "--threads", "99999"],
    ["cpu-stream", "--threads", str(2**64)], ["cpu-stream", "--bytes", "1e400"], ["cpu-stream", "--bytes", ""],
    ["cpu-stream", "--kind", "numa:" + "9" * 20], ["cpu-stream", "--reps", str(2**64)],
    ["cpu-stream", "--reps", "99999999999"], ["cpu-stream", "--device", str(2**40)],
    ["triad", "--processor", "cpu", "--threads", ""], ["triad", "--processor", "cpu", "--threads", ","],
    ["firsttouch", "--threads", ""], ["faults", "--threads", ","], ["qv", "--processor", "cpu", "--threads", ""],
    ["qv", "--qubits", str(2**32 + 2)], ["contention", "--threads", ""], ["interleave", "--threads", ","],
    ["himeno", "--processor", "cpu", "--dims", "3,3," + "9" * 30], ["migration", "--iterations", str(2**32 + 1)],
]


@pytest.mark.parametrize("args", NATIVE, ids=lambda a: " ".join(a)[:60])
def test_native_rejects_bad_values(args):
    res = umbench("run", *args, timeout=30)
    assert res.returncode in (0, 2), (res.returncode, res.stderr)  # 0 only where the case is skipped (no GPU)
    assert '"status":"usage"' in res.stdout.replace(" ", "") or '"status":"skipped"' in res.stdout.replace(" ", "")
    assert "terminate called" not in res.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
