"""umscope: measure, trace and model CPU-GPU data movement under every memory kind."""

__version__ = "0.1.0"
