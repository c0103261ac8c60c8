"""Every figure in docs/reference-*.md carries its provenance: each section that shows measurements has a
"Provenance:" line naming the umscope commit, the machine kind, the date and the command (in the line or in
the section's heading). bench/reference.py, which writes these documents, is tested on stand-in commands:
provenance per section, the budget, --base merging, and killing a command that runs out of time."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("reference-*.md"))
KINDS = r"nvidia-(?:h100-x[1248]|h200(?:-x[248])?)"
COMMIT = re.compile(r"`[0-9a-f]{7,40}(?:-dirty)?`")
COMMAND = re.compile(r"`([^`]*[a-z][^`]*)`")


def sections(text):
    """[(heading, body)] of the document's level-2 sections."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return [(p.split("\n", 1)[0], p.split("\n", 1)[1] if "\n" in p else "") for p in parts]


def shows_figures(body):
    """A section shows figures if it has a table, a fenced output or a number with a unit in its prose."""
    return ("```" in body or re.search(r"^\|", body, re.M) is not None
            or re.search(r"\d+(\.\d+)?\s*(GB/s|MiB|GiB|ns|µs|us|ms|TFLOP/s|%)", body) is not None)


def provenance_problems(text):
    problems = []
    for heading, body in sections(text):
        if not shows_figures(body):
            continue
        lines = [x for x in body.splitlines() if x.startswith("Provenance:")]
        if not lines:
            problems.append(f"{heading!r}: no Provenance line")
            continue
        p = lines[0]
        if not COMMIT.search(p):
            problems.append(f"{heading!r}: no commit hash in {p!r}")
        if not re.search(rf"`{KINDS}`", p):
            problems.append(f"{heading!r}: no machine kind in {p!r}")
        if not re.search(r"\b20\d\d-\d\d-\d\d\b", p):
            problems.append(f"{heading!r}: no date in {p!r}")
        cmds = [c for c in COMMAND.findall(p) + COMMAND.findall(heading)
                if not COMMIT.fullmatch(f"`{c}`") and not re.fullmatch(KINDS, c)]
        if not cmds:
            problems.append(f"{heading!r}: no command")
        elif any("..." in c or "…" in c for c in cmds):
            problems.append(f"{heading!r}: a command with elided options: {cmds}")
    return problems


def test_there_are_reference_documents():
    assert any(d.name == "reference-h100.md" for d in DOCS)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_reference_section_with_figures_has_its_provenance(doc):
    text = doc.read_text()
    assert provenance_problems(text) == []
    assert "commit not recorded" not in text.lower()


def test_the_check_notices_a_missing_provenance():
    good = ("## Bandwidth — `python3 bench/bandwidth.py`\n\nProvenance: umscope commit `645a970`, machine kind "
            "`nvidia-h100-x1`, 2026-11-22.\n\n| a | 3104.2 GB/s |\n")
    assert provenance_problems(good) == []
    assert provenance_problems(good.replace("645a970", "not recorded"))  # no commit
    assert provenance_problems(good.replace("`nvidia-h100-x1`", "the H100"))  # no machine kind
    assert provenance_problems(good.replace(", 2026-11-22", ""))  # no date
    assert provenance_problems(good.replace(" — `python3 bench/bandwidth.py`", ""))  # no command
    assert provenance_problems(good.replace("bandwidth.py`", "bandwidth.py ...`"))  # an elided command
    assert provenance_problems(good.replace("Provenance:", "Measured:"))  # no provenance line
    assert provenance_problems("## Old\n\nGPU read 3104.2 GB/s.\n")  # prose figures count too
    assert provenance_problems("## Planned\n\nNot measured yet: `bench/reference.py --part 2`.\n") == []


def _reference():
    spec = importlib.util.spec_from_file_location("reference", ROOT / "bench" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stand_ins(ref, monkeypatch, sections):
    monkeypatch.setattr(ref, "SECTIONS", sections)
    monkeypatch.setattr(ref, "NAMES", [s[0] for s in sections])
    monkeypatch.setattr(ref, "_gpu_line", lambda: "Test GPU, driver 1")


def test_reference_writes_provenance_per_section_and_merges_a_base(tmp_path, monkeypatch):
    ref = _reference()
    # A figure and its unit printed apart, so that the command itself (named in the document) shows no figure.
    echo = lambda v: [sys.executable, "-c", f"print({v}, 'GB/s')"]  # noqa: E731
    _stand_ins(ref, monkeypatch, [("one", 1, "One", [echo(3104.2)], 10, "note one"),
                                  ("two", 2, "Two", [echo(55.2), echo(6.1)], 10, "")])
    out = tmp_path / "ref.md"
    monkeypatch.setattr(sys, "argv", ["reference.py", "--commit", "abc1234", "--kind", "nvidia-h100-x1",
                                      "--part", "1", "--out", str(out)])
    assert ref.main() == 0
    first = out.read_text()
    assert provenance_problems(first) == []
    secs = ref.split_sections(first)
    assert "3104.2 GB/s" in secs["one"] and "`abc1234`" in secs["one"] and "note one" in secs["one"]
    assert "Not measured yet" in secs["two"] and "Provenance:" not in secs["two"]
    # Part 2 on top of part 1: part 1's section stays with its own commit; part 2's gets the new one.
    monkeypatch.setattr(sys, "argv", ["reference.py", "--commit", "def5678", "--kind", "nvidia-h100-x1",
                                      "--part", "2", "--base", str(out), "--out", str(out)])
    assert ref.main() == 0
    secs = ref.split_sections(out.read_text())
    assert "`abc1234`" in secs["one"] and "3104.2 GB/s" in secs["one"]
    assert "`def5678`" in secs["two"] and "55.2 GB/s" in secs["two"] and "6.1 GB/s" in secs["two"]
    assert f"`{ref.show(echo(6.1))}`" in secs["two"]  # every command of the section is named
    assert provenance_problems(out.read_text()) == []


def test_reference_budget_kills_a_slow_command_and_says_so(tmp_path, monkeypatch):
    ref = _reference()
    pidfile = tmp_path / "child.pid"
    # The command starts a child that would outlive it; the whole process group must go.
    slow = [sys.executable, "-c", "import subprocess, sys, time; "
            f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pidfile)!r}, 'w').write(str(c.pid)); time.sleep(60)"]
    fast = [sys.executable, "-c", "print(1.0, 'GB/s')"]
    _stand_ins(ref, monkeypatch, [("slow", 1, "Slow", [slow], 60, ""), ("late", 1, "Late", [fast], 60, "")])
    out = tmp_path / "ref.md"
    monkeypatch.setattr(sys, "argv", ["reference.py", "--commit", "abc1234", "--kind", "nvidia-h100-x1",
                                      "--budget", "6", "--out", str(out)])
    t0 = time.time()
    assert ref.main() == 0
    assert time.time() - t0 < 20
    secs = ref.split_sections(out.read_text())
    assert "out of time (killed)" in secs["slow"] and "exit status timeout" in secs["slow"]
    assert "Not measured: out of time" in secs["late"] and "1.0 GB/s" not in secs["late"]
    child = int(pidfile.read_text())
    time.sleep(0.5)
    assert subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True, text=True).stdout.strip() \
        in ("", "Z")  # gone (or a zombie awaiting its reaper)


def test_reference_rejects_bad_input(monkeypatch, capsys):
    ref = _reference()
    for argv in (["--commit", "abc1234", "--kind", "k", "--only", "nosuch"],
                 ["--commit", "not-a-commit", "--kind", "k"],
                 ["--commit", "abc1234", "--kind", "k", "--budget", "0"],
                 ["--commit", "abc1234", "--kind", "k", "--base", "/nonexistent/ref.md"]):
        monkeypatch.setattr(sys, "argv", ["reference.py"] + argv)
        assert ref.main() == 2
        err = capsys.readouterr().err
        assert err.startswith("reference.py: ") and err.count("\n") == 1


def test_reference_sections_use_existing_scripts_and_their_options():
    """Every bench script a section runs exists and accepts every option the section passes."""
    ref = _reference()
    assert len(set(ref.NAMES)) == len(ref.NAMES) and {s[1] for s in ref.SECTIONS} == {1, 2}
    helps = {}
    for _, _, _, cmds, _, _ in ref.SECTIONS:
        for cmd in cmds:
            if cmd[0] != sys.executable:
                continue
            script = Path(cmd[1])
            assert script.parent == ROOT / "bench" and script.exists()
            if script not in helps:
                helps[script] = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                                               text=True, env=dict(os.environ),
                                               timeout=60).stdout
            args = cmd[2:cmd.index("--")] if "--" in cmd else cmd[2:]
            for opt in (a for a in args if a.startswith("--")):
                assert opt in helps[script], f"{script.name} has no option {opt}"


def test_model_figures_of_the_h100_come_from_its_reference_document():
    """figures/h100-sxm-pcie5.yaml: every figure not marked as a datasheet value is printed, as written there, in
    the section of docs/reference-h100.md its comment names, and the source names that document's commit."""
    yml = (ROOT / "python" / "umscope" / "model" / "figures" / "h100-sxm-pcie5.yaml").read_text()
    ref = _reference()
    doc = ref.split_sections((ROOT / "docs" / "reference-h100.md").read_text())
    figures = re.findall(r"^  (\w+):\s*([0-9.]+)\s*#\s*(.*)$", yml, re.M)
    assert len(figures) >= 15
    for name, value, comment in figures:
        if "datasheet" in comment:
            continue
        if comment.startswith('model-validation.md "figures"'):
            # measured by bench/model_validate.py's microbenchmarks: printed in that document's figures line,
            # whose provenance names the commit the yaml names for them
            mv = (ROOT / "docs" / "model-validation.md").read_text()
            line = next(ln for ln in mv.splitlines() if ln.startswith("Figures "))
            assert re.search(rf"\b{name} {re.escape(value)}(?![\d])", line), f"{name}: {value} not in model-validation.md"
            commit = re.search(r"measured at commit ([0-9a-f]{7,})", mv).group(1)
            assert f"commit {commit}" in yml, f"{name}: the yaml does not name {commit}"
            continue
        if comment.startswith("model-validation-raw.jsonl"):
            # calibrated-5's figures, from held-out run 1's kept records: recomputed from them, 4 digits
            from umscope.model import calibrated
            recs = [json.loads(x) for x in (ROOT / "docs" / "model-validation-raw.jsonl").read_text().splitlines()
                    if x.strip()]
            fig, _ = calibrated.figures_from_records([r for r in recs if r.get("_tag") in ("fig256", "touch-after")])
            assert f"{fig[name]:.4g}" == value, f"{name}: {value} is not run 1's {fig[name]:.4g}"
            meta = next(r for r in recs if r.get("_tag") == "meta")
            assert f"commit {meta['commit']}" in yml, f"{name}: the yaml does not name {meta['commit']}"
            continue
        m = re.match(r'reference-h100\.md "([a-z0-9-]+)"', comment)
        assert m and m.group(1) in doc, f"{name}: the comment names no section of reference-h100.md: {comment!r}"
        sec = doc[m.group(1)]
        assert re.search(rf"(?<![\d.]){re.escape(value)}(?![\d])", sec), f"{name}: {value} not in {m.group(1)}"
        commit = COMMIT.search(sec.split("Provenance:", 1)[1]).group(0).strip("`")
        assert commit in yml.split("figures:")[0], f"{name}: the yaml's header does not name {commit}"

