"""SLURM host lists (``node[01-04],gpu7``) as node names: python-hostlist does the expanding;
this adds SLURM's order (duplicates kept, no sorting) and a one-line UsageError for bad input."""

from __future__ import annotations

import hostlist

from .errors import UsageError


def expand_hostlist(text: str) -> list[str]:
    """Expand a SLURM host list into node names, in order, duplicates kept as SLURM does.

    >>> expand_hostlist("NODE[01-02,05],gpu7")
    ['NODE01', 'NODE02', 'NODE05', 'gpu7']
    >>> expand_hostlist("r[1-2]n[1-2]")
    ['r1n1', 'r1n2', 'r2n1', 'r2n2']
    """
    text = text.strip()
    if not text:
        return []
    try:
        return list(hostlist.expand_hostlist(text, allow_duplicates=True, sort=False))
    except hostlist.BadHostlist as exc:
        raise UsageError(f"host list {text!r}: {exc}; write e.g. node[01-04,07],gpu1") from None
