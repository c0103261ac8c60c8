"""Fuzz of every file input and of the newer commands (issue 33): generated hostile files (empty, binary, devices,
FIFOs, deep nesting, non-finite and huge numbers, every record field swapped for the wrong type, hostile umsim
headers, machine descriptions, stores of other layouts, damaged, foreign, read-only) handed to model, simulate,
advise, merge, compare, export, report, runs, place and profile (their paths that run nothing), in this process.

Each invocation must end with exit 0, 1 or 2, never a traceback; exit 2 with one line on stderr; a file handed to
a command is never changed, and nothing appears beside it. Inputs that are no file of their kind must be exit 2.
About 1,200 invocations, under a minute on 2 cores."""

import copy
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import sqlite3
import struct
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from umscope import cli, place, probe, suite
from umscope.store import Store
from umscope.suite import Case

N = 1200
ROOT = Path(__file__).resolve().parents[1]
WRONG = [None, "x", "", -1, -1e300, 0, 1e308, [], {}, [1, "a"], True, "1", "²", 2 ** 70, "\x1b[2J", {"a": [[[]]]}]


def _calibration_records():
    recs = [json.loads(x) for x in (ROOT / "docs" / "model-validation-raw-run2.jsonl").read_text().splitlines()]
    keep = [r for r in recs if r.get("app") == "triad" and r.get("mode") == "explicit"][:1]
    keep += [r for r in recs if r.get("benchmark") in ("migration", "firsttouch", "cpu-stream", "faults")][:12]
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in keep]


def _trace_lines():
    lines = [{"k": "mem", "op": 1, "a": 1 << 30, "b": 32 * 4096}]
    lines += [{"k": "um", "c": 1, "s": 10 + i, "e": 11 + i, "a": (1 << 30) + i * 4096, "v": 4096, "f": 1}
              for i in range(32)]
    lines += [{"k": "um", "c": 3, "s": 60, "a": 1 << 30}, {"k": "kernel", "s": 5, "e": 50},
              {"k": "uvm_counters", "dev": -1, "htod": 32 * 4096}]
    return lines


def _mutate(rng, obj):
    """A copy of a record (or a list of them) with one field swapped for a wrong value, removed or added."""
    obj = copy.deepcopy(obj)
    target = obj if isinstance(obj, dict) else rng.choice(obj)
    keys = list(target)
    r = rng.random()
    if r < 0.7 and keys:
        target[rng.choice(keys)] = copy.deepcopy(rng.choice(WRONG))
    elif r < 0.85 and keys:
        del target[rng.choice(keys)]
    else:
        target[rng.choice(["extra", "samples", "iterations", "arrays", "_p", "dropped"])] = copy.deepcopy(rng.choice(WRONG))
    return obj


def _umstrace(page, allocs, events, na=None, ne=None, cut=0):
    b = b"UMSTRACE" + struct.pack("<II", page, len(allocs) if na is None else na)
    b += b"".join(struct.pack("<II", a, n) for a, n in allocs)
    b += struct.pack("<Q", len(events) if ne is None else ne) + b"".join(struct.pack("<I", e) for e in events)
    return b[:len(b) - cut] if cut else b


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    rng = random.Random(33)
    files = {"generic": [], "calibration": [], "figures": [], "trace": [], "machine": [], "store": [], "odd_store": [],
             "good": {}}

    def put(kind, name, data):
        p = d / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        if kind != "good":
            files[kind].append(str(p))
        return str(p)

    # no file of any kind
    for name, data in (("empty", b""), ("blank", b"  \n\n"), ("binary", bytes(range(256)) * 64),
                       ("latin1", "caf\xe9 \xff\n".encode("latin-1")), ("deep.json", "[" * 50000 + "]" * 50000),
                       ("deepobj.json", '{"a":' * 3000 + "1" + "}" * 3000), ("nan.json", '{"app": NaN}'),
                       ("inf.jsonl", '{"x": Infinity}\n'), ("huge.json", '{"bytes": 1e400}'),
                       ("bigint.json", '{"bytes": ' + "9" * 5000 + "}"), ("string.json", '"just a string"'),
                       ("number.json", "42"), ("numbers.json", "[1, 2, 3]"), ("gzbad.gz", b"\x1f\x8b\x08\x00garbage"),
                       ("gzbinary.gz", gzip.compress(bytes(range(256)) * 32)), ("nul.txt", b"\0" * 4096)):
        put("generic", name, data)
    fifo = d / "fifo"
    os.mkfifo(fifo)
    (d / "adir").mkdir()
    loop = d / "loop"
    os.symlink(loop, loop)
    files["generic"] += [str(fifo), str(d / "adir"), str(loop), "/dev/zero", "/dev/null", str(d / "missing"), ""]
    # records
    base = _calibration_records()
    files["good"]["calibration"] = files["good"]["figures"] = put("good", "calibration.jsonl",
                                                                 "".join(json.dumps(r) + "\n" for r in base))
    for i in range(40):
        recs = _mutate(rng, base)
        text = "".join(json.dumps(r) + "\n" for r in recs) if rng.random() < 0.7 else json.dumps(recs)
        put("calibration" if i % 2 else "figures", f"rec{i}.jsonl", text)
    # traces
    lines = _trace_lines()
    files["good"]["trace"] = put("good", "trace.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    for i in range(30):
        put("trace", f"trace{i}.jsonl", "".join(json.dumps(x) + "\n" for x in _mutate(rng, lines)))
    put("trace", "trace_gz_bomb.gz", gzip.compress(b"{}\n" * 200000))
    put("trace", "huge_v.jsonl", json.dumps(lines[0]) + "\n" + json.dumps(dict(lines[1], v=10 ** 15)) + "\n")
    put("trace", "huge_alloc.jsonl", json.dumps(dict(lines[0], b=1 << 62)) + "\n" + json.dumps(lines[1]) + "\n")
    for j, (page, allocs, events, na, ne, cut) in enumerate([
            (0, [(0, 16)], [1, 2], None, None, 0), (3, [(0, 16)], [1], None, None, 0),
            (4096, [(0, 16)], [1], 2 ** 32 - 1, None, 0), (4096, [(0, 16)], [1], None, 2 ** 64 - 1, 0),
            (4096, [(0, 16), (4, 8)], [1], None, None, 0), (4096, [(0, 2 ** 31)], [1], None, None, 0),
            (4096, [(0, 16)], [99], None, None, 0), (4096, [(0, 16)], [1, 2, 3], None, None, 6),
            (2 ** 31, [(0, 16)], [1], None, None, 0), (4096, [], [], None, None, 0)]):
        put("trace", f"hostile{j}.umstrace", _umstrace(page, allocs, events, na, ne, cut))
    # machine descriptions
    good_machine = (ROOT / "python" / "umscope" / "machines" / "h100-sxm-pcie5.yaml").read_text()
    files["good"]["machine"] = put("good", "machine.yaml", good_machine)
    for j, text in enumerate(["datapaths: [1, 2]", "datapaths: {hbm: fast}", "datapaths: {hbm: .nan}",
                              "datapaths: {hbm: -3}", "datapaths:\n\thbm: 1", "name: x", "- a\n- b",
                              "datapaths: " + "[" * 2000 + "]" * 2000, "a: &a [1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\n"
                              "c: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d]\n"
                              "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f]\ndatapaths: {}",
                              "datapaths: {hbm: 1e400}", "datapaths: {1: 2}", "!!python/object:os.system {}",
                              "datapaths: {hbm: 2001-01-01}", "sources: 5\ndatapaths: {hbm: 1}"]):
        put("machine", f"machine{j}.yaml", text)
    # stores
    good_store = d / "good.db"
    st = Store(good_store)
    for i in range(3):
        rid = st.create_run("bench selftest", f"umscope bench selftest {i}", [], {"reps": 3}, {"host": {"hostname": "n"}})
        st.add_case_result(rid, Case("selftest", None, {"mode": "ok"}), "ok", "", 0.0, 0.0,
                           [{"benchmark": "selftest", "op": "ok", "metric": "x", "value": 1.0, "median": 1.0,
                             "unit": "s"}] + [dict(r, type="record") for r in base[1:4]])
        st.finish_run(rid, "complete")
    st.close()
    db = sqlite3.connect(good_store)
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    files["good"]["store"] = str(good_store)

    def variant(name, sql, kind="store"):
        p = d / name
        shutil.copy(good_store, p)
        db = sqlite3.connect(p)
        db.executescript(sql)
        db.commit()
        db.close()
        files[kind].append(str(p))
    variant("future.db", "PRAGMA user_version = 7;")
    variant("dropped.db", "ALTER TABLE records DROP COLUMN metric;")
    variant("renamed.db", "ALTER TABLE runs RENAME COLUMN status TO state;")
    variant("nocases.db", "DROP TABLE cases;")
    variant("odd_rows.db", "UPDATE runs SET options='{bad', fingerprint='[[[', plan='x', hostname=NULL, gpu=NULL, "
                           "started=NULL, status=NULL; UPDATE records SET extra='[', bytes='many', value='x';",
            "odd_store")
    variant("escapes.db", "UPDATE runs SET label=char(27)||'[2J'||char(10)||'x', command=char(13)||'evil';", "odd_store")
    for name, table in (("foreign.db", "runs (a, b)"), ("other.db", "t (x)")):  # another program's databases
        db = sqlite3.connect(d / name)
        db.execute(f"CREATE TABLE {table}")
        db.commit()
        db.close()
        files["store"].append(str(d / name))
    damaged = d / "damaged.db"
    data = bytearray(good_store.read_bytes())
    data[4096 * 2:4096 * 3] = bytes(4096 * 1)
    data[200:260] = b"\xff" * 60
    damaged.write_bytes(bytes(data))
    files["odd_store"].append(str(damaged))
    put("store", "text.db", "hello")
    put("store", "header.db", b"SQLite format 3\0" + b"\xff" * 200)
    return d, files


def _call(argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _gen(rng, files, scratch):
    """(argv, must_refuse): must_refuse where the input handed is no file of its kind."""
    g = files["good"]
    generic = files["generic"]

    def pick(kind, p_good=0.25):
        if rng.random() < p_good:
            return g[kind], False
        if kind == "store" and rng.random() < 0.3:
            return rng.choice(files["odd_store"]), False  # readable, with odd rows: any outcome but a traceback
        if rng.random() < 0.35:
            return rng.choice(generic), True
        return rng.choice(files[kind]), kind in ("store", "machine")

    def refused_store():  # what a command that writes must refuse before it runs anything
        return rng.choice(files["store"] + [x for x in generic if x and not x.endswith("missing")])

    r = rng.random()
    out = scratch / f"o{rng.randrange(10 ** 9)}"
    if r < 0.22:
        cal, bad = pick("calibration")
        argv = ["model", "triad", "--calibration", cal]
        if rng.random() < 0.5:
            fig, bad2 = pick("figures")
            argv += ["--figures", fig]
            bad = bad or bad2
        if rng.random() < 0.3:
            argv += ["--mode", rng.choice(["all", "managed", "pinned", "bogus", ""])]
        return argv, bad
    if r < 0.30:
        store, bad = pick("store", 0.3)
        return ["model", "triad", "--calibration", rng.choice(["1", "2", "0", "9" * 25]), "--store", store], bad
    if r < 0.40:
        tr, bad = pick("trace", 0.15)
        cmd = rng.choice(["simulate", "advise"])
        argv = [cmd, "--trace", tr] + (["--policy", rng.choice(["uvm", "zerocopy"])] if cmd == "simulate" else [])
        return argv, bad
    if r < 0.44:
        fig, bad = pick("figures", 0.2)
        cmd = rng.choice(["simulate", "advise"])
        return [cmd, "triad", "--figures", fig, "--footprint", "8M"] + (["--policy", "uvm"] if cmd == "simulate"
                                                                        else []), bad
    if r < 0.52:
        m, bad = pick("machine", 0.2)
        return ["bench", "selftest", "--machine", m, "--dry-run"], bad and m != ""
    if r < 0.62:
        srcs = [pick("store", 0.5) for _ in range(rng.randint(1, 3))]
        paths = list(dict.fromkeys(s for s, _ in srcs))
        return ["merge", out] + paths, False
    if r < 0.70:
        store, bad = pick("store", 0.3)
        return ["compare", "--store", store, "-o", out], bad
    if r < 0.78:
        store, bad = pick("store", 0.3)
        fmt = rng.choice(["jsonl", "csv", "openmetrics", "caliper", "nvbandwidth"])
        return ["export", "--store", store, "--format", fmt, "-o", out], bad
    if r < 0.85:
        store, bad = pick("store", 0.3)
        return ["report", "--store", store, "-o", str(out) + ".html"], bad
    if r < 0.89:
        store, bad = pick("store", 0.3)
        return ["runs", "--store", store] + (["--json"] if rng.random() < 0.5 else []), bad
    if r < 0.94:
        rep = rng.choice([str(scratch), "/dev/full", "/proc/self/x.html", ""])
        if rng.random() < 0.5:
            return ["place", "--kind", "device", "--store", refused_store(), "--", "false"], True
        return ["place", "--kind", "device", "--report", rep, "--store", str(out), "--", "false"], True
    if rng.random() < 0.5:
        return ["profile", "--store", refused_store(), "--", "false"], True
    return ["profile", "--period", rng.choice(["0", "nan", "1e400s", "abc"]), "--store", str(out), "--", "false"], True


def _snapshot(d):
    out = {}
    for p in sorted(Path(d).iterdir()):
        if p.is_file() and not p.is_symlink():
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[p.name] = None
    return out


def test_fuzz_file_inputs_and_new_commands(hostile, tmp_path, monkeypatch):
    d, files = hostile
    fp = probe.probe()
    monkeypatch.setattr(probe, "probe", lambda: fp)
    monkeypatch.setattr(probe, "uvm_params", lambda: {})
    monkeypatch.setattr(place, "check_config", lambda kind, rules: None)
    monkeypatch.setattr(place, "environment", lambda kind, rules="", allow=False, stats_pattern=None, base=None:
                        dict(os.environ))
    monkeypatch.setattr(suite, "execute", lambda case, options, meter=None: suite.Outcome("ok", "", [], 0.0))
    monkeypatch.setattr(place, "run_program", lambda cmd, env: (1, "", "", 0.01))
    before = _snapshot(d)
    rng = random.Random(3301)
    failures, codes = [], {}
    scratch = tmp_path / "out"
    scratch.mkdir()
    for i in range(N):
        argv, must_refuse = _gen(rng, files, scratch)
        try:
            rc, out, err = _call(argv)
        except BaseException as e:  # noqa: BLE001 - a traceback is the defect under test
            failures.append((argv, f"{type(e).__name__}: {e}"[:300]))
            continue
        codes[rc] = codes.get(rc, 0) + 1
        if rc not in (0, 1, 2):
            failures.append((argv, f"exit {rc}: {err[-300:]}"))
        elif rc == 2:
            lines = err.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("umscope: error:") or "\x1b" in lines[0]:
                failures.append((argv, f"stderr not one clear line: {err[-400:]!r}"))
        elif must_refuse:
            failures.append((argv, f"exit {rc} for an input that is no file of its kind: {err[-300:]}"))
        if i % 100 == 99:
            after = _snapshot(d)
            if after != before:
                changed = sorted(k for k in set(after) | set(before) if after.get(k, 0) != before.get(k, 0))
                failures.append((argv, f"inputs changed or files created beside them: {changed}"))
                before = after
    assert _snapshot(d) == before
    assert not failures, f"{len(failures)} of {N}:\n" + "\n".join(f"{a!r}: {w}" for a, w in failures[:30])
    assert codes.get(0, 0) > 100 and codes.get(2, 0) > 400, codes
