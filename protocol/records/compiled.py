"""How kipling compiles its numba kernels (the columnar decoder, the encoder, the sink's partitioner).

One rule for all of them: :func:`compiled` is ``njit(cache=True, nogil=True)``, so Spark's Python
workers load machine code from numba's cache instead of compiling again in every process, and
decoding runs while other threads (the fetch client) hold the GIL; where no cache location is
writable numba refuses ``cache=True`` at decoration, and the kernel is compiled per process
instead. :func:`compiled_helper` is for functions the kernels call: compiled with them, not on their
own (LLVM inlines them; numba's own ``inline="always"`` was measured twice as slow on the walk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

__all__ = ["compiled", "compiled_helper"]

F = TypeVar("F", bound=Callable[..., Any])


def compiled(fn: F) -> F:
    """``njit(cache=True, nogil=True)``, or without cache where no cache location is writable."""
    try:
        return cast(F, njit(cache=True, nogil=True)(fn))
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return cast(F, njit(nogil=True)(fn))


def compiled_helper(fn: F) -> F:
    """A function the kernels call, compiled (and cached) with them."""
    return cast(F, njit(nogil=True)(fn))
