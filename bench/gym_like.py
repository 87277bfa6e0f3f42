"""A driver shaped like NeMo Gym's: plain ray.init() (no init_ray), server actors that each
start an HTTP server subprocess in a session of its own (as Gym's resource servers run under
uvicorn), rollouts spread over the nodes, then it returns without stopping anything."""

import os
import subprocess
import sys
import time

import ray


@ray.remote(num_cpus=0.25)  # a share of a CPU: SPREAD places zero-CPU work mostly on the local node
class Server:
    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the actor's process group, as a server launcher does
        )

    def where(self) -> str:
        return f"{os.uname().nodename} pid {self.proc.pid}"


@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def rollout(i: int) -> str:
    time.sleep(0.05)
    return os.uname().nodename


ray.init()
servers = [Server.options(scheduling_strategy="SPREAD").remote(18000 + i) for i in range(6)]
print("servers:", sorted(ray.get([s.where.remote() for s in servers])), flush=True)
print("rollouts on:", sorted(set(ray.get([rollout.remote(i) for i in range(60)]))), flush=True)
print("done; leaving the servers running", flush=True)
