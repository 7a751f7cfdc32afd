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


def around_fork(before: Callable[[], None], after_in_parent: Callable[[], None]) -> None:
    """Call the bound ``before`` in the parent just before ``os.fork()`` and ``after_in_parent`` just after it,
    while their object is alive (weak references only, as :func:`reinit_after_fork`)."""
    if not hasattr(os, "register_at_fork"):
        return
    refs = (weakref.WeakMethod(before), weakref.WeakMethod(after_in_parent))  # type: ignore[arg-type]

    def _call(ref: weakref.WeakMethod[Callable[[], None]]) -> Callable[[], None]:
        def call() -> None:
            bound = ref()
            if bound is not None:
                bound()

        return call

    os.register_at_fork(before=_call(refs[0]), after_in_parent=_call(refs[1]))
