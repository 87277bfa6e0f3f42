"""SLURM host lists: ``NODE[01-02,05],gpu7`` <-> node names, as ``scontrol show hostnames`` does.

Pure functions, so the bootstrap on every node can expand ``SLURM_JOB_NODELIST`` without calling
``scontrol`` (one less RPC to slurmctld per node).
"""

from __future__ import annotations

import itertools
import re

from .errors import UsageError

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"host list {text!r}: nested '[' at position {i}; write e.g. node[1-3]")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"host list {text!r}: ']' without '[' at position {i}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise UsageError(f"host list {text!r}: unclosed '['; write e.g. node[1-3]")
    parts.append(text[start:])
    return parts


def _expand_ranges(body: str, whole: str) -> list[str]:
    """``01-03,07`` -> ['01', '02', '03', '07'], keeping the zero padding of the lower bound."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise UsageError(f"host list {whole!r}: bad range {item!r}; write e.g. [01-04,07]")
        lo_text, hi_text = m.group(1), m.group(2)
        if hi_text is None:
            out.append(lo_text)
            continue
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise UsageError(f"host list {whole!r}: range {item!r} runs backwards; write {hi_text}-{lo_text}")
        width = len(lo_text) if lo_text.startswith("0") or len(lo_text) == len(hi_text) else 0
        out.extend(str(v).zfill(width) for v in range(lo, hi + 1))
    return out


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
    names: list[str] = []
    for part in _split_top_level(text):
        part = part.strip()
        if not part:
            continue
        pieces = re.split(r"(\[[^\]]*\])", part)
        choices: list[list[str]] = []
        for piece in pieces:
            if piece.startswith("[") and piece.endswith("]"):
                choices.append(_expand_ranges(piece[1:-1], text))
            elif piece:
                choices.append([piece])
        names.extend("".join(combo) for combo in itertools.product(*choices))
    return names
