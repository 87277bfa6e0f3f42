"""The parts lab test's driver: a worker group on the trainer part and one on the rollout part
(RayVirtualCluster(part=...)), answers from the judge pool through its one URL (both instances
must answer), each rollout worker runs code in its own node's sandbox sidecar; with --kill-judge
the test kills one judge instance midway: every call must still succeed, and the restarted
instance answers again. Prints one JSON line
(PARTS {...}) and writes it to <job dir>/parts.json.

argv: JUDGE_URL [--kill-judge]
"""

import json
import os
import socket
import sys
import time
import urllib.request

import ray

import slurm_rl
from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray


class Where:
    def report(self) -> dict:
        return {"host": socket.gethostname(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "")}

    def sandbox(self, code: str) -> str:
        here = slurm_rl.services()["sandbox"]["here"]
        host, port = here[0].removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(code.encode() + b"\n")
            return s.makefile().readline().strip()


def ask(url: str) -> dict:
    with urllib.request.urlopen(url + "/judge", timeout=10) as res:
        return json.loads(res.read())


def main() -> int:
    judge_url = sys.argv[1]
    init_ray()
    seen, sandbox = {}, []
    for part in ("trainer", "rollout"):
        cluster = RayVirtualCluster([2], use_gpus=True, num_gpus_per_node=2, part=part, name=part)
        group = RayWorkerGroup(cluster, Where, name_prefix=part)
        seen[part] = ray.get(group.run_all_workers_single_data("report"))
        if part == "rollout":
            sandbox = ray.get(group.run_all_workers_single_data("sandbox", code="print(6 * 7)"))
        group.shutdown()
        cluster.shutdown()
    found = slurm_rl.services()
    answers = [ask(judge_url) for _ in range(8)]
    killed = None
    if "--kill-judge" in sys.argv:  # the test kills one judge instance (on its node), calls go on
        job_dir = slurm_rl.run_dir()
        killed = answers[0]
        (job_dir / "kill_judge_now").write_text(json.dumps(killed) + "\n")
        end = time.monotonic() + 120
        while time.monotonic() < end:
            answers.append(ask(judge_url))  # raises (the driver fails) if a call fails
            judge = slurm_rl.services()["judge"]
            restarted = {a["pid"] for a in answers[8:]} - {a["pid"] for a in answers[:8]}  # a new instance answered
            if (job_dir / "judge_killed").exists() and judge["ready"] == judge["total"] and restarted:
                break
            time.sleep(0.1)
        found = slurm_rl.services()
    out = {
        "workers": seen,
        "sandbox": sandbox,
        "services": {k: {"ready": v["ready"], "total": v["total"], "url": v["url"]} for k, v in found.items()},
        "judge_url_arg": judge_url,
        "answers": answers,
        "killed": killed,
    }
    line = json.dumps(out)
    print("PARTS " + line, flush=True)
    (slurm_rl.run_dir() / "parts.json").write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
