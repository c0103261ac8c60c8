"""Each application umbench registers declares its model facts where it is registered (AppRegistrar in
native/apps/NAME.cu: access pattern, umsim's generator and iterations or the reason it has none, declared
traffic), `umbench list --json` carries them, and model/apps.py reads them from there; the model's own variants
(sgemm) name a registered application (issue 36). CPU only."""
import math

import pytest

from umscope import apps as suite_apps
from umscope import registry
from umscope.model import apps, calibrated, dos
from umscope.model import simulate as sim
from umscope.report import headline

REGISTERED = sorted(registry.applications())


def test_umbench_registers_applications():
    """A registry without applications (an umbench built without CUDA compiles none) would leave every test
    below with nothing to check."""
    assert {"triad", "gemm", "qv"} <= set(REGISTERED)


@pytest.mark.parametrize("app", REGISTERED)
def test_every_registered_application_declares_its_model_facts(app):
    """Every fact is declared in the registration: the access pattern, the declared traffic, and the simulator's
    generator with its iterations, or, where umsim has none, the declared reason (a reason is a fact: the
    simulator's commands do not offer the application and the sweep does not replay it)."""
    f = registry.applications()[app].get("model")
    assert f, f"{app}: registered in umbench without model facts (native/apps/{app}.cu AppRegistrar)"
    assert f["pattern"] in apps.PATTERNS
    if not f["generator"]:
        assert f["not_simulated"].strip(), f"{app}: no umsim generator and no declared reason"
        assert f["iterations"] == 0 and app not in dos.ITERATIONS and app not in sim.SIM_APPS
        assert apps.not_simulated()[app] == f["not_simulated"]
    else:
        assert f["not_simulated"] == "" and app not in apps.not_simulated()
        assert app in sim.SIM_APPS and f["iterations"] >= 1 and dos.ITERATIONS[app] == f["iterations"]
    assert 0 < f["read"] <= 1 and 0 <= f["written"] <= 1
    assert calibrated.ACCESS[app] == (f["read"], f["written"]) == apps.access()[app]
    assert apps.pattern(app) == f["pattern"]


def test_declared_fractions_reach_python_as_the_very_doubles_declared():
    """The registry prints fractions with every digit: 2.0 / 3 in C++ is 2 / 3 here, not 0.666666667."""
    assert calibrated.ACCESS["triad"] == (2 / 3, 1 / 3) and calibrated.ACCESS["gemm"] == (2 / 3, 1 / 3)
    assert all(math.isfinite(v) for pair in calibrated.ACCESS.values() for v in pair)


def test_the_patterns_come_from_the_registry_in_the_reports_order():
    assert apps.PATTERNS == tuple(registry.load()["app_patterns"])
    assert apps.PATTERNS[0] == "streaming" and len(set(apps.PATTERNS)) == len(apps.PATTERNS)


@pytest.mark.parametrize("variant", sorted(apps.VARIANTS))
def test_a_model_variant_names_a_registered_application_and_has_whole_facts(variant):
    base, f = apps.VARIANTS[variant]
    assert base in REGISTERED and variant not in REGISTERED
    assert suite_apps.ALIASES[variant][0] == base  # `umscope app run sgemm` runs the same application
    assert apps.registered(variant) == base and apps.facts()[variant] is f
    assert set(f) == set(registry.applications()[base]["model"])
    assert f["pattern"] in apps.PATTERNS and f["generator"] and f["iterations"] >= 1 and not f["not_simulated"]
    names = list(apps.facts())
    assert names.index(variant) == names.index(base) + 1  # placed after its application


def test_the_model_names_only_registered_applications():
    assert set(apps.facts()) == set(REGISTERED) | set(apps.VARIANTS)
    for name in apps.facts():
        assert apps.registered(name) in REGISTERED, name


def test_the_restated_lists_read_the_one_table():
    assert sim.SIM_APPS == apps.simulated() and set(sim.SIM_APPS) <= set(apps.facts())
    assert set(calibrated.ACCESS) == set(apps.facts())
    assert list(headline.APP_CLASSES) == list(apps.PATTERNS)
    assert sorted(a for names in headline.APP_CLASSES.values() for a in names) == sorted(apps.facts())
    assert set(apps.not_simulated()) == set(apps.facts()) - set(apps.simulated())


def test_reading_the_model_modules_starts_no_runner():
    """The facts are read when first used: importing the model and building the command line start no umbench
    (a report or `umscope --help` must not need one)."""
    import subprocess
    import sys
    code = ("import subprocess, sys\n"
            "def refuse(*a, **k): raise SystemExit('a process was started: ' + repr(a[0]))\n"
            "subprocess.run = subprocess.Popen = refuse\n"
            "from umscope import cli\n"
            "import umscope.model.commands, umscope.model.dos, umscope.report.headline\n"
            "cli.build_parser()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-400:]


@pytest.mark.parametrize("app", apps.simulated())
def test_every_generator_replays_in_umsim(app):
    s = sim.run({"app": app, "footprint": 4 << 20, "capacity": 8 << 20, "policy": "uvm",
                 "iterations": apps.iterations()[app]})
    assert s["app"] == app and s["faults"] > 0
