"""The sections of the run report. Each module of umscope.report that draws a part of the page registers
it here, once, at import:

- a page section (`page_section(name, title, order)`) is drawn on every report at its order: those below
  FAMILIES_AT before the per-family sections, the rest after them. It is called with the Page and returns
  its HTML ('' when it has nothing to show), heading included.
- a family section (`family_section(*families)`) draws the records of the benchmark families it names, under
  the family's heading, in the order the run measured the families. It is called with (family, records of
  that family, Page) and returns the HTML below the heading. Every application record (op 'app') belongs to
  the family 'applications'. A family no module names is drawn as its chart and its records table
  (common.chart_and_table).

Every module of the package is imported once before the first report (discover()), so adding a section is
adding one module."""

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

FAMILIES_AT = 100  # page sections ordered below this come before the per-family sections


@dataclass(frozen=True)
class Page:
    """What a section may read: the run's row, its cases, its measured records (status ok, with a median;
    each with its case's params), the machine fingerprint and every record of the run."""
    run: dict
    cases: list
    records: list
    fp: dict = None
    all_records: tuple = ()  # every record of the run, whatever its status (the status banner reads them)


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    order: int  # page sections; None for family sections
    render: Callable
    families: tuple = ()
    show_unmeasured: bool = False  # family sections: drawn for a family whose cases ran but left no records
    module: str = ""


_SECTIONS = {}
_discovered = False


def _add(section):
    old = _SECTIONS.get(section.name)
    if old and old.module != section.module:
        raise ValueError(f"report section {section.name!r} is registered by {old.module} and {section.module}")
    for other in _SECTIONS.values():
        taken = set(other.families) & set(section.families)
        if taken and other.name != section.name:
            raise ValueError(f"report sections {other.name!r} and {section.name!r} both draw {sorted(taken)}")
    _SECTIONS[section.name] = section


def page_section(name, title, order):
    """Registers fn(page) -> HTML as the page section `name` at `order`."""
    def add(fn):
        _add(Section(name, title, order, fn, module=fn.__module__))
        return fn
    return add


def family_section(*families, title="", show_unmeasured=False):
    """Registers fn(family, records, page) -> HTML as the section of these benchmark families."""
    def add(fn):
        _add(Section(families[0], title or families[0], None, fn, tuple(families), show_unmeasured,
                     module=fn.__module__))
        return fn
    return add


def discover():
    """Imports every module of umscope.report once, so that each registers its sections."""
    global _discovered
    if _discovered:
        return
    import umscope.report as package
    for m in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{m.name}")
    _discovered = True


def page_sections() -> list:
    """The page sections in their order."""
    discover()
    return sorted((s for s in _SECTIONS.values() if s.order is not None), key=lambda s: (s.order, s.name))


def family_sections() -> list:
    discover()
    return [s for s in _SECTIONS.values() if s.order is None]


def for_family(family):
    """The section that draws this family, or None (then: its chart and records table)."""
    return next((s for s in family_sections() if family in s.families), None)
