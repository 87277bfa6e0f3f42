"""The parts lab test's driver: a worker group on the trainer part and one on the rollout part
(RayVirtualCluster(part=...)), answers from the judge pool through its one URL (both instances
must answer), each rollout worker runs code in its own node's sandbox sidecar; with --kill-judge
the test kills one judge instance midway: every call must still succeed, and the restarted
instance answers again. Prints one JSON line
(PARTS {...}) and writes it to <job dir>/parts.json.

The sandbox (its own image, without slurm-rl) and the prober (the job's image) are isolated
(parts.yaml): a worker on each node sends its sidecar PROBE, code a hostile program would run,
which reports what it reached of the job (its token, its dir, other processes, the node's Ray
sockets, the job's Ray by its address, the dashboard's job API).

argv: JUDGE_URL [--kill-judge]
"""

import base64
import json
import os
import socket
import sys
import time
import urllib.request

import ray

import slurm_rl
from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray

PROBE = r"""
import glob, json, os, subprocess, sys, urllib.request
T = json.loads(TARGETS)
out = {"env": dict(os.environ), "procs": {}, "environ_has_ray": []}
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        out["procs"][pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        if b"RAY_" in open(f"/proc/{pid}/environ", "rb").read():
            out["environ_has_ray"].append(pid)
    except OSError:
        pass
out["job_dir"] = sorted(glob.glob(T["job_dir"] + "/**", recursive=True))
out["slurm_rl_in_image"] = bool(glob.glob("/opt/slurm-rl/lib/python3*/site-packages/slurm_rl"))
try:
    out["token"] = open(T["token"]).read()
except OSError as exc:
    out["token"] = type(exc).__name__
out["tokens_found"] = glob.glob(T["fileroot"] + "/**/ray_auth_token", recursive=True)
out["ray_sockets"] = glob.glob(T["temp_root"] + "/srl-*/**/sockets/*", recursive=True)
join = "import ray; ray.init(address=%r); print('JOINED', ray.cluster_resources())" % T["gcs"]
try:  # Ray retries a refused token for long: its first refusal is the answer
    res = subprocess.run([T["python"], "-c", join], capture_output=True, text=True, timeout=8)
    out["gcs"] = [res.returncode, (res.stdout + res.stderr)[-600:]]
except subprocess.TimeoutExpired as exc:
    said = "".join(p.decode(errors="replace") if isinstance(p, bytes) else p for p in (exc.stdout, exc.stderr) if p)
    out["gcs"] = [-1, said[-600:]]
if T["dashboard"]:
    req = urllib.request.Request("http://" + T["dashboard"] + "/api/jobs/", data=b'{"entrypoint": "touch /tmp/pwned"}',
                                 headers={"Content-Type": "application/json"})
    try:
        out["dashboard"] = urllib.request.urlopen(req, timeout=10).status
    except Exception as exc:
        out["dashboard"] = repr(exc)[:200]
open(os.path.join(os.environ["SLURM_RL_SERVICE_DIR"], "mine.txt"), "w").write("written\n")
print(json.dumps(out))
"""


def probe_code() -> str:
    """PROBE as the one line a sandbox takes, aimed at this job."""
    job_dir = slurm_rl.run_dir()
    targets = {
        "job_dir": str(job_dir),
        "token": str(job_dir / "ray_auth_token"),
        "fileroot": str(job_dir.parents[2]),
        "temp_root": "/tmp",
        "python": sys.executable,  # one with ray: a hostile program finds it the same way
        "gcs": ray.get_runtime_context().gcs_address,
        "dashboard": ray._private.worker.get_dashboard_url() or "",
    }
    code = PROBE.replace("TARGETS", repr(json.dumps(targets)))
    return f"exec(__import__('base64').b64decode({base64.b64encode(code.encode())!r}).decode())"


class Where:
    def report(self) -> dict:
        return {"host": socket.gethostname(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "")}

    def sandbox(self, code: str, name: str = "sandbox") -> str:
        here = slurm_rl.services()[name]["here"]
        host, port = here[0].removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as s:  # the probe tries for 8 s
            s.sendall(code.encode() + b"\n")
            return s.makefile().readline().strip()


def ask(url: str) -> dict:
    with urllib.request.urlopen(url + "/judge", timeout=10) as res:
        return json.loads(res.read())


def main() -> int:
    judge_url = sys.argv[1]
    init_ray()
    seen, sandbox, probes = {}, [], {}
    for part in ("trainer", "rollout"):
        cluster = RayVirtualCluster([2], use_gpus=True, num_gpus_per_node=2, part=part, name=part)
        group = RayWorkerGroup(cluster, Where, name_prefix=part)
        seen[part] = ray.get(group.run_all_workers_single_data("report"))
        if part == "rollout":
            sandbox = ray.get(group.run_all_workers_single_data("sandbox", code="print(6 * 7)"))
            probes["sandbox"] = ray.get(group.run_single_worker_single_data("sandbox", 0, code=probe_code()))
        else:  # the trainer's node: the prober, isolated in the job's image
            probes["prober"] = ray.get(
                group.run_single_worker_single_data("sandbox", 0, code=probe_code(), name="prober")
            )
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
        "probes": {k: json.loads(v.split("|", 1)[1]) if "|{" in v else v for k, v in probes.items()},
    }
    line = json.dumps(out)
    print("PARTS " + line, flush=True)
    (slurm_rl.run_dir() / "parts.json").write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
