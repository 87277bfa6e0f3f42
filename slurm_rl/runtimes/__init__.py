"""Container runtimes, one module each behind one interface (base.Runtime): how a job's node
step starts, what a running job's attach joins, what the end of a job, a requeue and a bare
node's cleanup remove, what the doctor checks. Nothing outside this package knows a runtime
by its name: it asks ``runtime_of(spec.container_runtime)`` (or the manifest's
``container.runtime``). Adding a runtime: a module with a ``Runtime`` subclass, listed here,
and its tests (docs/architecture.md)."""

from __future__ import annotations

from ..core.errors import SpecError
from .apptainer import Apptainer
from .bare import Bare
from .base import Runtime
from .pyxis import Pyxis

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Bare(), Pyxis(), Apptainer())}
NAMES = tuple(RUNTIMES)


def runtime_of(name: str) -> Runtime:
    """The runtime called ``name`` (a spec's ``container_runtime``, a manifest's runtime)."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise SpecError(f"container_runtime {name!r}: unknown; use one of {', '.join(NAMES)}") from None


__all__ = ["NAMES", "RUNTIMES", "Runtime", "runtime_of"]
