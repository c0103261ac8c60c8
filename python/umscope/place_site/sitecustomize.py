"""Put on PYTHONPATH by `umscope place`: when the interpreter starts, before the program can make its first
CUDA allocation, routes PyTorch's CUDA memory to umscope's allocator library (umscope_torch_route.py says
how: PyTorch's caching allocator stays, its segments come from libumalloc in the kind, so PyTorch's memory
statistics, CUDA graphs and torch.compile keep working). Does nothing unless UMSCOPE_PLACE_LIB is set; a
program whose Python has no torch runs unplaced (said once on stderr)."""
import os
import sys


def _install():
    lib = os.environ.get("UMSCOPE_PLACE_LIB")
    if not lib:
        return
    try:
        import torch
    except ImportError as e:
        sys.stderr.write(f"umscope place: this Python ({sys.executable}) cannot import torch ({e}); "
                         "the program runs without the placement\n")
        return
    import ctypes
    ctypes.CDLL(lib).umscope_place_stats_json(None, 0)  # reads its configuration now; its stats are written at exit
    import umscope_torch_route
    try:
        route = umscope_torch_route.install(torch, lib)
    except (AttributeError, TypeError) as e:  # a PyTorch without MemPools served by a pluggable allocator
        sys.stderr.write(f"umscope place: PyTorch {torch.__version__} cannot route its allocations to umscope's "
                         f"allocator (torch.cuda.MemPool with a CUDAPluggableAllocator: {e}); not run\n")
        sys.stderr.flush()
        os._exit(2)

    import atexit

    @atexit.register
    def _outside():
        if torch.cuda.is_initialized() and route.pools:
            umscope_torch_route.report_outside(route)


_install()
