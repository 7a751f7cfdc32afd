"""Re-initialise an object in a forked child without keeping it alive."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable


def reinit_after_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in the child after ``os.fork()`` while its object is alive.

    The hook holds only a weak reference, so registering it never keeps a processor or exporter alive. Locks,
    threads and SQLite connections do not survive a fork; the method replaces them.
    """
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.WeakMethod(method)  # type: ignore[arg-type]

    def _after_in_child() -> None:
        bound = ref()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=_after_in_child)
