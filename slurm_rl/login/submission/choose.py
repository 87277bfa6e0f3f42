"""`submit --cluster auto`: the one submission asked of every named cluster at once, in parallel,
each with its own spec (the job's options resolved against it, its plan and preflight: a
partition it lacks, too few GPUs per node, an account or QOS it does not have, a runtime it
lacks are refusals, one line each) and SLURM's own estimate of the start (``sbatch --test-only``
of the very script submit would stage); the earliest start wins and the choice is said in words."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from ...config.clusters import Cluster, cluster_spec, known, load_clusters
from ...config.spec import ClusterSpec
from ...core.errors import SlurmRlError, UsageError
from ...core.options import JobOptions
from ...slurm import SlurmClient
from ...slurm.runner import client_installed
from .plan import resolve_plan
from .preflight import preflight
from .render import render_job

ASK_TIMEOUT_S = 15.0  # per cluster, asked side by side


@dataclass(frozen=True)
class Offer:
    name: str
    start: float | None = None  # SLURM's estimate (epoch); None: refused
    why: str = ""  # the refusal, one line
    spec: ClusterSpec | None = None
    opts: JobOptions | None = None
    client: SlurmClient | None = None
    waiting: int | None = None  # the jobs pending in its partition now (None: unknown)
    unasked: bool = False  # not asked at all (reached only through its login node)
    login: str = ""  # asked through this login node: the job is submitted there

    def words(self, now: float) -> str:
        if self.start is None:
            return f"cluster {self.name}: {'not asked' if self.unasked else 'cannot run it'}: {self.why}"
        left = self.start - now
        if left <= 60:
            return f"cluster {self.name}: starts now"
        queue = f", {self.waiting} job{'' if self.waiting == 1 else 's'} waiting there" if self.waiting else ""
        if left > 7 * 86400:  # SLURM's answer when what holds the nodes has no time limit
            return f"cluster {self.name}: no start in sight (what runs there sets no end){queue}"
        hours, minutes = divmod(int(left // 60), 60)
        return f"cluster {self.name}: starts in ~{f'{hours} h {minutes} min' if hours else f'{minutes} min'}{queue}"


def estimate(spec: ClusterSpec, opts: JobOptions, client: SlurmClient) -> tuple[float, int | None]:
    """SLURM's estimated start of the job on this cluster (epoch) and, when that is not now, the
    jobs waiting in its partition; a cluster that cannot run it raises, in one line."""
    plan = resolve_plan(spec, opts, client)
    preflight(plan, client)
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="srl-test-only-") as script:
        script.write(render_job(plan).script)
        script.flush()
        start = datetime.fromisoformat(client.estimated_start(script.name)).timestamp()
    return start, client.jobs_waiting(opts.partition or spec.partition) if start > time.time() + 60 else None


# a cluster asked through its login node (a laptop's): its estimate, as `submit --estimate` there says it
ThroughLogin = Callable[[str, Cluster], tuple[float, int | None]]


def ask(
    name: str,
    entry: Cluster,
    resolve: Callable[[ClusterSpec], JobOptions],
    client_for: Callable[[ClusterSpec], SlurmClient],
    how: str = "auto",
    through_login: ThroughLogin | None = None,
) -> Offer:
    """One cluster's answer: refused in one line, or SLURM's estimated start of the job there."""
    try:
        if entry.login and not client_installed():
            if through_login is None:
                why = f"reached through {entry.login}; --cluster {how} asks only clusters whose SLURM answers here"
                return Offer(name, why=why, unasked=True)
            start, waiting = through_login(name, entry)
            return Offer(name, start, waiting=waiting, login=entry.login)
        spec = cluster_spec(name)
        opts = resolve(spec)
        client = client_for(spec)
        client.timeout_s = ASK_TIMEOUT_S
        start, waiting = estimate(spec, opts, client)
    except SlurmRlError as exc:
        return Offer(name, why=" ".join(str(exc).removeprefix("slurm-rl: error: ").split())[:300])
    return Offer(name, start, "", spec, opts, client, waiting)


def ask_all(
    resolve: Callable[[ClusterSpec], JobOptions],
    client_for: Callable[[ClusterSpec], SlurmClient],
    how: str = "auto",
    through_login: ThroughLogin | None = None,
) -> tuple[list[Offer], list[str]]:
    """Every named cluster asked in parallel: the ones that can run the job, earliest estimated
    start first (ties: the clusters file's order), and one line per cluster saying why."""
    named = load_clusters()
    if not named:
        raise UsageError(f"--cluster {how}: no clusters to choose from; {known(named)}")
    with ThreadPoolExecutor(max_workers=min(16, len(named))) as pool:
        offers = list(
            pool.map(lambda item: ask(item[0], item[1], resolve, client_for, how, through_login), sorted(named.items()))
        )
    now = time.time()
    able = sorted((o for o in offers if o.start is not None), key=lambda o: o.start or 0.0)
    lines = [o.words(now) for o in sorted(offers, key=lambda o: (o.start is None, o.start or 0.0))]
    if not able:
        raise UsageError(f"--cluster {how}: no cluster can run this job: " + "; ".join(lines))
    return able, lines


def choose_cluster(
    resolve: Callable[[ClusterSpec], JobOptions],
    client_for: Callable[[ClusterSpec], SlurmClient],
    through_login: ThroughLogin | None = None,
) -> tuple[Offer, list[str]]:
    """--cluster auto: the cluster whose start SLURM estimates first, and why."""
    able, lines = ask_all(resolve, client_for, "auto", through_login)
    return able[0], lines


def choice_said(chosen: Offer, lines: list[str]) -> str:
    return f"--cluster auto: {chosen.name} (" + "; ".join(lines) + ")"
