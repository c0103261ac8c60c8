"""Batch-1 matrix-vector products for weights read in place from host memory (the llm application's
zero-copy placements): one Triton kernel, split over K so that enough CTAs keep enough reads in flight over
the link, accumulating in fp32. It computes what the model's own layer computes (y = x W + b for GPT-2's
Conv1D, y = x W^T + b for nn.Linear); only the kernel differs. cuBLAS's choices for these shapes read host
memory slowly in half precision (its sm90 kernels reach about 9 GB/s over the link, docs/llm.md).

`install(model, torch)` routes every Linear/Conv1D whose input has one row (batch 1, one token: the decode
step) through the kernel and leaves every other call (the prefill) to the layer's own forward. The op is a
`torch.library.triton_op`, so a compiled decode step keeps it as it is. Imports torch and Triton only when
used."""

# (BLOCK_K, BLOCK_N, warps) per weight layout: conv1d = W [K, N] contiguous along N (GPT-2's Conv1D), linear
# = W [N, K] contiguous along K (nn.Linear). Each tile row is >= 256 contiguous bytes.
TILES = {("conv1d", 2): (32, 128, 4), ("conv1d", 4): (32, 64, 4), ("linear", 2): (128, 16, 4),
         ("linear", 4): (64, 16, 4)}
CTAS_PER_SM = 4  # split K until the grid has this many CTAs per SM (bytes in flight over the link)

_op = None


def split_k(K, N, block_k, block_n, sms):
    """How many slices of K: enough CTAs (CTAS_PER_SM per SM), at most one BLOCK_K chunk per slice."""
    col_blocks = -(-N // block_n)
    want = -(-CTAS_PER_SM * sms // col_blocks)
    return max(1, min(want, -(-K // block_k)))


_kernel = None


def kernel():
    """The Triton kernel (built once per process): y[n] += x . W[:, n] over this program's K slices, fp32
    accumulation; bench/llm_gemv_probe.py sweeps its tile shapes."""
    global _kernel
    if _kernel is not None:
        return _kernel
    import triton
    import triton.language as tl

    @triton.jit
    def gemv_kernel(x_ptr, w_ptr, y_ptr, b_ptr, K, N, swk, swn, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr):
        # y[n] += sum over this program's K chunks of x[k] * W[k, n]; W[k, n] at w_ptr + k * swk + n * swn.
        # The first K slice adds the bias b[n] (read once per column block, in the kernel: no separate
        # conversion and add kernels, each a round trip to host memory for a bias that lives there).
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for k0 in range(pid_k * BLOCK_K, K, SPLIT_K * BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mask_k = offs_k < K
            w = tl.load(w_ptr + offs_k[:, None] * swk + offs_n[None, :] * swn,
                        mask=mask_k[:, None] & mask_n[None, :], other=0.0)
            xv = tl.load(x_ptr + offs_k, mask=mask_k, other=0.0)
            acc += tl.sum(w.to(tl.float32) * xv.to(tl.float32)[:, None], axis=0)
        if HAS_BIAS:
            if pid_k == 0:
                acc += tl.load(b_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        if SPLIT_K == 1:
            tl.store(y_ptr + offs_n, acc, mask=mask_n)
        else:
            tl.atomic_add(y_ptr + offs_n, acc, mask=mask_n, sem="relaxed")

    _kernel = gemv_kernel
    return _kernel


def _define(torch):
    """The torch op over the Triton kernel (once per process)."""
    global _op
    if _op is not None:
        return _op
    from typing import Optional
    import triton
    gemv_kernel = kernel()

    from torch.library import triton_op, wrap_triton

    @triton_op("umscope::host_gemv", mutates_args={})
    def host_gemv(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], conv1d: bool,
                  sms: int) -> torch.Tensor:
        # x [1, K]; w [K, N] (conv1d) or [N, K]; bias [N] or None. Returns [1, N] in x's dtype.
        if conv1d:
            K, N = w.shape
            swk, swn = w.stride(0), w.stride(1)
        else:
            N, K = w.shape
            swk, swn = w.stride(1), w.stride(0)
        layout = "conv1d" if conv1d else "linear"
        bk, bn, warps = TILES[(layout, 2 if w.element_size() <= 2 else 4)]
        split = split_k(K, N, bk, bn, sms)
        y = torch.zeros((N,), dtype=torch.float32, device=x.device)
        wrap_triton(gemv_kernel)[(triton.cdiv(N, bn), split)](x, w, y, bias if bias is not None else y, K, N, swk,
                                                               swn, BLOCK_K=bk, BLOCK_N=bn, SPLIT_K=split,
                                                               HAS_BIAS=bias is not None, num_warps=warps)
        return y.to(x.dtype).view(1, N)

    _op = host_gemv
    return _op


def install(model, torch) -> int:
    """Routes the model's one-row matrix-vector products (Conv1D, nn.Linear) through the kernel; returns how
    many layers now do."""
    op = _define(torch)
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers without Conv1D
        Conv1D = ()
    dev = next(model.parameters()).device
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 1
    n = 0
    for mod in model.modules():
        conv1d = isinstance(mod, Conv1D) if Conv1D else False
        if not (conv1d or isinstance(mod, torch.nn.Linear)):
            continue
        own = mod.forward

        def forward(x, _mod=mod, _own=own, _conv1d=conv1d):
            if x.numel() != x.shape[-1]:  # more than one row: the layer's own forward (prefill)
                return _own(x)
            y = op(x.reshape(1, -1), _mod.weight, _mod.bias, _conv1d, sms)
            return y.view(*x.shape[:-1], y.shape[-1])

        mod.forward = forward
        mod._umscope_gemv = conv1d
        n += 1
    return n


def warm(model, torch) -> float:
    """Runs the kernel once for every installed layer's shape (Triton compiles one binary per tile and split),
    so that no compile falls into a timed or captured step; returns the wall seconds it took."""
    from umscope.timing import Stopwatch
    sw = Stopwatch()
    for mod in model.modules():
        if not hasattr(mod, "_umscope_gemv"):
            continue
        w = mod.weight
        k = w.shape[0] if mod._umscope_gemv else w.shape[1]
        mod.forward(torch.zeros((1, 1, k), dtype=w.dtype, device=w.device))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return sw.elapsed()
