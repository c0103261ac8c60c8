"""Each application umbench registers has its model facts (model/apps.py: access pattern, umsim's generator,
declared traffic), and the model names no application umbench does not register (issue 36). CPU only."""
import pytest

from umscope import registry
from umscope.model import apps, calibrated, dos
from umscope.model import simulate as sim
from umscope.report import headline

REGISTERED = sorted(registry.applications())


@pytest.mark.parametrize("app", REGISTERED)
def test_every_registered_application_has_its_model_facts(app):
    """Every fact is declared: the access pattern, the declared traffic, and the simulator's generator with its
    iterations, or, where umsim has none, the declared reason (model/apps.py NOT_SIMULATED). A reason is a
    fact (the simulator's commands do not offer the application and the sweep does not replay it); an
    application with neither a generator nor a reason fails."""
    assert app in apps.FACTS, f"{app}: registered in umbench, no entry in model/apps.py FACTS"
    pattern, generator, iterations, access = apps.FACTS[app]
    assert pattern in apps.PATTERNS
    if generator is None:
        assert apps.NOT_SIMULATED.get(app, "").strip(), f"{app}: no umsim generator and no declared reason"
        assert iterations is None and app not in dos.ITERATIONS and app not in sim.SIM_APPS
    else:
        assert app not in apps.NOT_SIMULATED
        assert generator in sim.SIM_APPS and iterations >= 1 and dos.ITERATIONS[app] == iterations
    rd, wr = access
    assert 0 < rd <= 1 and 0 <= wr <= 1 and calibrated.ACCESS[app] == access


def test_a_reason_not_to_simulate_names_an_application_without_a_generator():
    assert set(apps.NOT_SIMULATED) == {a for a, f in apps.FACTS.items() if f[1] is None}


def test_the_model_names_only_registered_applications():
    for name in apps.FACTS:
        assert apps.REGISTERED.get(name, name) in REGISTERED, name


def test_the_restated_lists_read_the_one_table():
    assert sim.SIM_APPS == apps.simulated() and set(sim.SIM_APPS) <= set(apps.FACTS)
    assert set(calibrated.ACCESS) == set(apps.FACTS)
    assert list(headline.APP_CLASSES) == list(apps.PATTERNS)
    assert sorted(a for names in headline.APP_CLASSES.values() for a in names) == sorted(apps.FACTS)


@pytest.mark.parametrize("app", apps.simulated())
def test_every_generator_replays_in_umsim(app):
    s = sim.run({"app": app, "footprint": 4 << 20, "capacity": 8 << 20, "policy": "uvm",
                 "iterations": apps.FACTS[app][2]})
    assert s["app"] == app and s["faults"] > 0
