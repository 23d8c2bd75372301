"""What a forked child inherits from polyc, made usable there.

`os.fork` (multiprocessing's default start method on Linux, prefork servers) copies the parent's
memory but only the forking thread.  Two things then break:

- a lock another thread held at the fork stays held in the child forever (a compile in flight:
  the child's next compile of that kernel waits for a thread that does not exist).  polyc's locks
  are `ForkSafeLock`s: the child gets each back unlocked;
- libgomp's thread pool does not survive a fork: a child whose parent ran a parallel region hangs
  at its first own one.  The child runs OpenMP regions on one thread instead (correct, serial;
  use the "spawn" start method for parallel children).
"""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Any

_LOCKS: "weakref.WeakSet[ForkSafeLock]" = weakref.WeakSet()


class ForkSafeLock:
    """A `threading.Lock` (or `RLock`, `reentrant=True`) that a forked child gets back unlocked."""

    __slots__ = ("_factory", "_lock", "__weakref__")

    def __init__(self, reentrant: bool = False):
        self._factory = threading.RLock if reentrant else threading.Lock
        self._lock = self._factory()
        _LOCKS.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        """Whether some thread holds it (a reentrant lock: whether it could not be taken now)."""
        if hasattr(self._lock, "locked"):
            return self._lock.locked()
        free = self._lock.acquire(blocking=False)
        if free:
            self._lock.release()
        return not free

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)

    def _renew(self) -> None:
        self._lock = self._factory()


def _after_fork_in_child() -> None:
    for lock in list(_LOCKS):
        lock._renew()
    try:      # only if the parent loaded libgomp: RTLD_NOLOAD finds it, never loads it
        runtime = ctypes.CDLL("libgomp.so.1", mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
    except OSError:
        return
    runtime.omp_set_num_threads(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
