"""umscope: measure, trace and model CPU-GPU data movement under every memory kind.

Python API: umscope.open_store(path), umscope.probe(), umscope.run_plan(...) (docs/python-api.md)."""

__version__ = "0.1.0"

from umscope.api import ResultStore, open_store, run_plan  # noqa: E402
from umscope import probe  # noqa: E402  (a module that is also callable: umscope.probe())

__all__ = ["open_store", "run_plan", "probe", "ResultStore", "__version__"]
