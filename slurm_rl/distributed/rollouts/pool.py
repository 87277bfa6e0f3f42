"""NeMo Gym-style work spread over a job's nodes (``slurm_rl.rollouts``).

``verify(fn, items)``: a stateless ``fn(item)`` on every item, as Ray tasks with
``scheduling_strategy="SPREAD"``. Items go in chunks sized so that one task runs at least
``min_task_s`` (measured on a first chunk), so scheduling does not dominate; each item has its
own ``timeout_s`` (a hung verifier becomes a failed item, not a hung run); results come back in
input order. ``max_concurrency_per_node`` caps the tasks running at once on a node through Ray's
own accounting (each task asks for that share of a node's CPUs), which is what a verifier that
waits (on a sandbox, a service) rather than computes needs.

``RolloutPool(fn, path)``: a pool of actors (``actors_per_node`` on each node) that
turns prompts into ``{"id", "prompt", "response", "reward"}`` records, appended to a JSONL
file in the job dir as they finish, with a progress bar. Run it again on the same file and the
prompts whose ids are already there are not redone.
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import SlurmRlError
from ...core.job_env import JobEnvironment
from ...core.paths import JobPaths

MIN_TASK_S = 0.01


@dataclass
class Verdict:
    """One item's outcome: ``value`` when ``ok``, else ``error`` (e.g. a timeout)."""

    ok: bool
    value: Any = None
    error: str | None = None
    host: str | None = None


class _ItemTimeout(SlurmRlError):
    pass


def _run_items(fn: Callable[[Any], Any], items: list[Any], timeout_s: float | None) -> list[Verdict]:
    """Inside a task: fn on each item; SIGALRM interrupts an item past its timeout (the task
    runs in its worker's main thread) so that the next item still runs."""
    import socket

    host = socket.gethostname()
    use_alarm = timeout_s is not None and threading.current_thread() is threading.main_thread()

    def on_alarm(signum: int, frame: Any) -> None:
        raise _ItemTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm) if use_alarm else None
    out = []
    try:
        for item in items:
            try:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))  # type: ignore[arg-type]
                try:
                    out.append(Verdict(True, fn(item), host=host))
                finally:
                    if use_alarm:
                        signal.setitimer(signal.ITIMER_REAL, 0)
            except _ItemTimeout:
                out.append(Verdict(False, error=f"timed out after {timeout_s:g} s", host=host))
            except Exception as exc:  # noqa: BLE001 - one bad item must not sink its chunk
                out.append(Verdict(False, error=f"{type(exc).__name__}: {exc}", host=host))
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
    return out


def _task_cpus(max_concurrency_per_node: int | None) -> float:
    """CPU share per task so that at most that many run on the smallest node at once."""
    import ray

    if not max_concurrency_per_node:
        return 1.0
    cpus = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
    if not cpus:
        raise ValueError("verify: no Ray node offers CPUs")
    return min(cpus) / max_concurrency_per_node


def _chunks(items: list[Any], size: int) -> list[tuple[int, list[Any]]]:
    return [(i, items[i : i + size]) for i in range(0, len(items), size)]


def verify(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    *,
    timeout_s: float | None = None,
    min_task_s: float = MIN_TASK_S,
    max_concurrency_per_node: int | None = None,
    progress: bool = True,
) -> list[Verdict]:
    """``fn(item)`` for every item on the cluster's nodes (SPREAD), results in input order."""
    import ray

    items = list(items)
    if not items:
        return []
    task = ray.remote(_run_items).options(scheduling_strategy="SPREAD", num_cpus=_task_cpus(max_concurrency_per_node))
    results: list[Verdict | None] = [None] * len(items)
    # a first chunk of one item measures the cost per item; the rest are sized from it
    t0 = time.perf_counter()
    first = ray.get(task.remote(fn, items[:1], timeout_s))
    per_item = max(time.perf_counter() - t0, 1e-6)
    results[0] = first[0]
    size = max(1, math.ceil(min_task_s / per_item))
    # All chunks at once: SPREAD deals them round-robin over the nodes, each node runs its share
    # as its CPUs (or the per-node cap) allow. (Keeping only a window in flight measured slower.)
    pending = {task.remote(fn, chunk, timeout_s): start for start, chunk in _chunks(items[1:], size)}
    bar = _Progress(progress, len(items), "verify")
    bar.advance(1)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        start = pending.pop(ready[0]) + 1
        verdicts = ray.get(ready[0])
        results[start : start + len(verdicts)] = verdicts
        bar.advance(len(verdicts))
    bar.close()
    return results  # type: ignore[return-value]


class _Progress:
    """A rich progress bar, or nothing (progress=False, or no terminal and no log wanted)."""

    def __init__(self, enabled: bool, total: int, what: str, done: int = 0) -> None:
        self._bar = None
        if enabled:
            from rich.progress import Progress

            self._bar = Progress()
            self._bar.start()
            self._task = self._bar.add_task(what, total=total, completed=done)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


class _RolloutActor:
    def __init__(self, fn: Callable[[Any], tuple[Any, float]]) -> None:
        self._fn = fn

    def rollout(self, record_id: str, prompt: Any) -> dict[str, Any]:
        import socket

        response, reward = self._fn(prompt)
        return {"id": record_id, "prompt": prompt, "response": response, "reward": reward, "host": socket.gethostname()}


class RolloutPool:
    """Actors that turn prompts into (prompt, response, reward) records in a JSONL file.

    ``fn(prompt) -> (response, reward)`` runs in the actors. ``path`` defaults to
    ``rollouts.jsonl`` in the job dir. ``key(prompt)`` names a prompt (default: its index)."""

    def __init__(
        self,
        fn: Callable[[Any], tuple[Any, float]],
        path: str | os.PathLike[str] | None = None,
        *,
        actors_per_node: int = 1,
        num_cpus: float = 0.5,
        key: Callable[[int, Any], str] | None = None,
    ) -> None:
        import ray

        job_dir = JobEnvironment.current().job_dir or Path(".")
        self.path = Path(path) if path is not None else JobPaths(Path(job_dir)).rollouts
        self.key = key or (lambda i, prompt: str(i))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
        cls = ray.remote(_RolloutActor)
        # Pinned, not SPREAD: SPREAD is best effort and puts two actors on one node when another
        # is busy at that moment (seen on the lab). soft: a node that died meanwhile (or cannot
        # hold the actor) gives its actors to the others.
        self.actors = [
            cls.options(num_cpus=num_cpus, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)).remote(
                fn
            )
            for node in nodes
            for _ in range(actors_per_node)
        ] or [cls.options(num_cpus=num_cpus).remote(fn)]

    def done_ids(self) -> set[str]:
        if not self.path.exists():
            return set()
        ids = set()
        for line in self.path.read_text().splitlines():
            try:
                ids.add(json.loads(line)["id"])
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut by a kill is redone
        return ids

    def run(self, prompts: list[Any], progress: bool = True) -> list[dict[str, Any]]:
        """Records for every prompt not yet in the file, each appended as it finishes
        (least-loaded: an actor gets the next prompt when it is free). Returns the new ones."""
        import ray

        done = self.done_ids()
        todo = [(self.key(i, p), p) for i, p in enumerate(prompts) if self.key(i, p) not in done]
        bar = _Progress(progress, len(prompts), "rollouts", done=len(prompts) - len(todo))
        queue = iter(todo)
        in_flight: dict[Any, Any] = {}
        for actor in self.actors:
            nxt = next(queue, None)
            if nxt is None:
                break
            in_flight[actor.rollout.remote(*nxt)] = actor  # type: ignore[union-attr]
        new: list[dict[str, Any]] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as out:
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                actor = in_flight.pop(ready[0])
                record = ray.get(ready[0])
                out.write(json.dumps(record) + "\n")
                out.flush()
                new.append(record)
                bar.advance(1)
                nxt = next(queue, None)
                if nxt is not None:
                    in_flight[actor.rollout.remote(*nxt)] = actor
        bar.close()
        return new

    def shutdown(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)  # type: ignore[arg-type]
        self.actors = []
