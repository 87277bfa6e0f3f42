"""NeMo Gym's own code_gen verification on a slurm-rl job, unchanged: Gym's Ray task
(``check_correctness_remote``, ``scheduling_strategy="SPREAD"``) checks the solutions of the
rollouts Gym ships (``environments/code_gen/data/example_rollouts.jsonl``) against their unit
tests; the rewards must equal the recorded ones. Connects as Gym does (a plain ``ray.init()``:
RAY_ADDRESS and the job's token come from the environment) and prints one JSON line: rewards,
recorded rewards, the nodes alive when the driver connected, and the nodes Ray ran the tasks
on (Ray's state API: the job needs ``--dashboard``; Ray reuses a worker it leased for the next
task, so fast tasks crowd on the first nodes). Needs the real ``nemo-gym`` package (Python >= 3.12)."""

import json
import socket
import sys
import time
from collections import Counter
from pathlib import Path

import nemo_gym
import ray

ROOT = Path(nemo_gym.__file__).resolve().parent.parent  # Gym ships environments/ and resources_servers/ beside it
sys.path.insert(0, str(ROOT / "resources_servers" / "code_gen"))
from lcb_integration.compute_code_generation_metrics import check_correctness_remote  # noqa: E402
from lcb_integration.extraction_utils import LMStyle, extract_code  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 8  # each rollout checked this many times (spread)
DATA = ROOT / "environments" / "code_gen" / "data"

ray.init()  # Gym's initialize_ray(): no address given, RAY_ADDRESS decides
nodes_at_start = sum(1 for n in ray.nodes() if n["Alive"])  # what Gym's SPREAD can use from the first task
problems = [json.loads(line) for line in (DATA / "example.jsonl").read_text().splitlines()]
rollouts = [json.loads(line) for line in (DATA / "example_rollouts.jsonl").read_text().splitlines()]


def prompt(row: dict) -> str:
    """The user's message (a rollout's copy of the input carries more fields than the problem's)."""
    return row["responses_create_params"]["input"][0]["content"]


by_prompt = {prompt(p): p for p in problems}
t0 = time.monotonic()
refs, recorded = [], []
for rollout in rollouts:
    problem = by_prompt[prompt(rollout)]
    # what Gym's verify() does: the model's text (the rollout keeps it), Gym's code extraction
    code = extract_code(rollout["extracted_model_output"] or "", LMStyle.OpenAIChat)
    sample = {"input_output": json.dumps(problem["verifier_metadata"]["unit_tests"])}
    recorded.append(rollout["reward"])
    refs.append([check_correctness_remote.remote(sample, code, 10, False) for _ in range(REPEATS)])
rewards = []
for copies in refs:
    results = [result for result, _ in ray.get(copies)]
    scores = {1.0 if all(r is True for r in result) else 0.0 for result in results}
    assert len(scores) == 1, f"one solution scored differently on different nodes: {results}"
    rewards.append(scores.pop())
seconds = time.monotonic() - t0
hosts = {n["NodeID"]: n["NodeManagerHostname"] for n in ray.nodes()}
from ray.util.state import list_tasks  # noqa: E402 - the state API needs the job's dashboard

tasks = list_tasks(
    filters=[("func_or_class_name", "=", "check_correctness_remote")], limit=1000, raise_on_missing_output=False
)
print(
    json.dumps(
        {
            "driver_host": socket.gethostname(),
            "nodes_at_start": nodes_at_start,
            "rewards": rewards,
            "recorded": recorded,
            "tasks": len(tasks),
            "task_nodes": dict(Counter(hosts.get(t.node_id, t.node_id) for t in tasks)),
            "seconds": round(seconds, 2),
        }
    ),
    flush=True,
)
