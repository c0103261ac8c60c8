"""Put on PYTHONPATH by `umscope place`: installs umscope's allocator library as PyTorch's CUDA allocator
when the interpreter starts, before the program can make its first CUDA allocation. Does nothing unless
UMSCOPE_PLACE_LIB is set; a program whose Python has no torch runs unplaced (said once on stderr)."""
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
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "umscope_alloc", "umscope_free")
    torch.cuda.memory.change_current_allocator(alloc)
    import ctypes
    ctypes.CDLL(lib).umscope_place_stats_json(None, 0)  # reads its configuration now; its stats are written at exit


_install()
