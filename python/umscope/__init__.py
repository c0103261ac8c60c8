"""umscope: measure, trace and model CPU-GPU data movement under every memory kind.

Python API: umscope.open_store(path), umscope.probe(), umscope.run_plan(...) (docs/python-api.md)."""

try:  # written into the package when it was built (cmake/Provenance.cmake; umscope.provenance)
    from umscope._version import version as __version__
except ImportError:  # a source tree that was never built
    __version__ = "0.1.0"
__all__ = ["open_store", "run_plan", "probe", "ResultStore", "__version__"]


def __getattr__(name):
    # Loaded on first use, so that `import umscope` (and the CLI) stay light.
    if name in ("open_store", "run_plan", "ResultStore"):
        from umscope import api
        return getattr(api, name)
    if name == "probe":  # the module umscope.probe, which is callable
        import importlib
        return importlib.import_module("umscope.probe")
    raise AttributeError(f"module 'umscope' has no attribute {name!r}")
