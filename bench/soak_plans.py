"""The soak's plan (bench/soak.py): which jobs a seed runs, in what order, each with its node
count, container runtime, fault and shape. Every kind of draw has a random stream of its own,
so a seed's other draws stay when an option (--parts, --shapes, --heal) adds a kind."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from soak_faults import FAULTS, LONG_FAULTS
from soak_shapes import SHAPES


@dataclass
class Plan:
    index: int
    nodes: int
    runtime: str  # the spec's container runtime: "none", "pyxis" or "apptainer"
    fault: str  # "none" or one of FAULTS
    delay_s: float  # when a bring-up fault lands after submission
    gpus: bool = False  # one GPU per node (the GPU lab's spec)
    parts: bool = False  # a job of parts: its Ray nodes on labgpu, a required service on labcpu
    shape: str = "plain"  # or one of SHAPES (bench/soak_shapes.py): a sweep, a chain, an interactive cluster
    heal: bool = False  # --heal 1: a lost worker node is replaced and the job completes right

    @property
    def container(self) -> bool:
        return self.runtime != "none"

    def describe(self, seed: int) -> str:
        kind = (self.runtime if self.container else "bare") + (", 1 GPU per node" if self.gpus else "")
        kind += ", parts: Ray + a required service" if self.parts else ""
        kind += f", a {self.shape}" if self.shape != "plain" else ""
        kind += ", --heal 1" if self.heal else ""
        return f"seed {seed} job #{self.index} ({self.nodes} node(s), {kind}, fault {self.fault})"


def plans(
    seed: int,
    jobs: int,
    runtimes: tuple[str, ...] = (),
    faults: tuple[str, ...] = FAULTS,
    gpus: bool = False,
    parts: bool = False,
    shapes: bool = False,
    heal: bool = False,
) -> list[Plan]:
    """The seed's jobs; about 3 in 10 in a container of one of ``runtimes`` (those the lab has),
    with ``gpus`` about 1 in 4 bare ones on GPUs, with ``parts`` about 3 in 10 a job of parts,
    with ``shapes`` about 1 in 4 of the rest a sweep, a chain or an interactive cluster, with no
    fault of its own, with ``heal`` about 3 in 10 of the plain ones a 2-node job with --heal 1 and
    a fault of HEAL_FAULTS (each drawn apart: a seed's other draws stay)."""
    rng, gpu_rng, parts_rng = random.Random(seed), random.Random(f"{seed}-gpus"), random.Random(f"{seed}-parts")
    shape_rng, heal_rng = random.Random(f"{seed}-shapes"), random.Random(f"{seed}-heal")
    out = []
    for i in range(jobs):
        fault = rng.choice(faults) if rng.random() < 1 / 3 else "none"
        nodes, boxed, delay = rng.choice((1, 2, 3)), rng.random() < 0.3, rng.uniform(0.0, 4.0)
        runtime = rng.choice(runtimes) if boxed and runtimes else "none"
        # a GPU job: bare, not preempted (labspot is not the GPU spec's partition)
        on_gpus = gpus and gpu_rng.random() < 0.25 and runtime == "none" and fault != "preempt"
        # a job of parts: its own partitions (no preemption's labspot, no OOM's --mem)
        in_parts = parts and parts_rng.random() < 0.3 and not on_gpus and fault not in PARTS_SKIP
        shape = shape_rng.choice(SHAPES) if shapes and shape_rng.random() < 0.25 else "plain"
        if shape != "plain" and not (in_parts or on_gpus):
            out.append(Plan(i, nodes, runtime, "none", delay, shape=shape))
            continue
        if heal and not (in_parts or on_gpus) and heal_rng.random() < 0.3:  # the lab's third node: the spare
            out.append(Plan(i, 2, runtime, heal_rng.choice(HEAL_FAULTS), delay, heal=True))
            continue
        out.append(Plan(i, min(nodes, 2) if in_parts else nodes, runtime, fault, delay, on_gpus, in_parts))
    return out


# the faults that land within 30 s of a job's start: CI's short soak covers every one (the time
# limit, a minute at least, and node failures, SlurmdTimeout's, are the long soak's)
SHORT_FAULTS = (*FAULTS, "preempt", "held_port")
# faults that catch every job on a node (preempt: SLURM cancels every lower-tier job there),
# run by a covering plan after the rest, alone: it lands on the job it is aimed at
LAB_WIDE = ("preempt", "node_fail")
assert set(SHORT_FAULTS) <= set(FAULTS) | set(LONG_FAULTS)


def covering_plans(
    seed: int, faults: tuple[str, ...] = SHORT_FAULTS, runtimes: tuple[str, ...] = (), untouched: int = 2
) -> list[Plan]:
    """A plan built to cover FAULTS: one job per fault class and UNTOUCHED jobs with none, each
    one's node count, container runtime (bare or one of RUNTIMES) and bring-up delay drawn from
    the seed, in the seed's order, the lab-wide faults last (``soak`` runs those alone). Any seed
    covers every class; CI runs one, the long soak's ``--cover`` any."""
    rng = random.Random(f"{seed}-cover")
    kinds = [*faults, *["none"] * untouched]
    rng.shuffle(kinds)
    kinds.sort(key=lambda f: f in LAB_WIDE)  # stable: the seed's order otherwise
    out = []
    for i, fault in enumerate(kinds):
        nodes = (
            rng.choice((2, 3)) if fault in ("raylet_kill", "node_fail") else rng.choice((1, 2, 3))
        )  # a worker's raylet
        runtime = rng.choice(("none", *runtimes))
        out.append(Plan(i, nodes, runtime, fault, rng.uniform(0.0, 4.0)))
    return out


# a healing job's faults: a worker node lost (failed, or its raylet killed) and healed, or none
HEAL_FAULTS = ("none", "node_fail", "raylet_kill")
HEAL_FLAGS = ["--heal", "1", "--heal-timeout", "120"]


PARTS_SKIP = ("preempt", "oom", "held_port")
PARTS_FILE = (
    "ray: {{nodes: {nodes}, partition: labgpu}}\n"
    "svc: {{nodes: 1, partition: labcpu, service: 'python3 -m http.server --bind 0.0.0.0 {{port}}', "
    "ready: 'http:/', required: true}}\n"
)


def shape_flags(plan: Plan, seed: int) -> list[str]:
    """How many nodes the job asks for: --nodes, or a parts file (Ray nodes and a service's)."""
    if not plan.parts:
        return ["--nodes", str(plan.nodes)]
    path = Path(tempfile.gettempdir()) / f"soak-{seed}-{plan.index}-parts.yaml"
    path.write_text(PARTS_FILE.format(nodes=plan.nodes))
    return ["--parts", str(path)]
