"""List what the lab's container image needs from this interpreter's environment: every file of
slurm-rl's runtime dependencies (the closure of its requirements, without extras it does not
ask for), one per line as ``SITE_DIR<TAB>PATH`` (PATH relative to the site-packages directory
it is installed in), sorted. Headers, test suites and Java jars nothing in a job loads are left
out (about 230 MB of torch and ray).

    python tests/lab/image_files.py ROOT_PACKAGE

`slurm-lab image` copies these into the image's own environment, so the image carries the same
versions the login node tested with, built offline. Used only by the lab.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.requirements import Requirement

UNUSED = ("torch/include/", "torch/test/", "torch/bin/test_", "torch/bin/protoc", "ray/jars/")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str) -> dict[str, metadata.Distribution]:
    dists = {_norm(d.metadata["Name"]): d for d in metadata.distributions()}
    todo = [(root, frozenset[str]())]
    seen: dict[str, metadata.Distribution] = {}
    extras_seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        key = _norm(name)
        if (key, extras) in extras_seen or key not in dists:
            continue
        extras_seen.add((key, extras))
        dist = seen[key] = dists[key]
        for text in dist.requires or []:
            req = Requirement(text)
            env = {"extra": ""}
            wanted = (
                req.marker is None or req.marker.evaluate(env) or any(req.marker.evaluate({"extra": e}) for e in extras)
            )
            if wanted:
                todo.append((req.name, frozenset(req.extras)))
    return seen


def main() -> int:
    root = sys.argv[1]
    dists = closure(root)
    files = set()
    for key, dist in dists.items():
        if key == _norm(root):
            continue  # the project itself is copied from the checkout
        for f in dist.files or []:
            parts = f.parts
            if parts[0] == ".." or "__pycache__" in parts or f.suffix == ".pyc" or str(f).startswith(UNUSED):
                continue  # console scripts (bin/), bytecode the image compiles itself, unused parts
            site = dist.locate_file("")
            files.add(f"{site}\t{f}")
    print("\n".join(sorted(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
