"""Each application umbench registers has its model facts (model/apps.py: access pattern, umsim's generator,
declared traffic), and the model names no application umbench does not register (issue 36). CPU only."""
import pytest

from umscope import registry
from umscope.model import apps, calibrated, dos
from umscope.model import simulate as sim
from umscope.report import headline

REGISTERED = sorted(registry.applications())
NOT_MODELLED_YET = {"qv": "no umsim generator and no declared fractions yet (issue 36)"}


@pytest.mark.parametrize("app", [pytest.param(a, marks=pytest.mark.xfail(reason=NOT_MODELLED_YET[a], strict=True))
                                 if a in NOT_MODELLED_YET else a for a in REGISTERED])
def test_every_registered_application_has_its_model_facts(app):
    assert app in apps.FACTS, f"{app}: registered in umbench, no entry in model/apps.py FACTS"
    pattern, generator, iterations, access = apps.FACTS[app]
    assert pattern in apps.PATTERNS
    assert generator in sim.SIM_APPS and iterations >= 1 and dos.ITERATIONS[app] == iterations
    rd, wr = access
    assert 0 < rd <= 1 and 0 <= wr <= 1 and calibrated.ACCESS[app] == access


def test_the_model_names_only_registered_applications():
    for name in apps.FACTS:
        assert apps.REGISTERED.get(name, name) in REGISTERED, name


def test_the_restated_lists_read_the_one_table():
    assert sim.SIM_APPS == apps.simulated() and set(sim.SIM_APPS) <= set(apps.FACTS)
    assert set(calibrated.ACCESS) == {a for a, f in apps.FACTS.items() if f[3]}
    assert list(headline.APP_CLASSES) == list(apps.PATTERNS)
    assert sorted(a for names in headline.APP_CLASSES.values() for a in names) == sorted(apps.FACTS)


@pytest.mark.parametrize("app", apps.simulated())
def test_every_generator_replays_in_umsim(app):
    s = sim.run({"app": app, "footprint": 4 << 20, "capacity": 8 << 20, "policy": "uvm",
                 "iterations": apps.FACTS[app][2]})
    assert s["app"] == app and s["faults"] > 0
