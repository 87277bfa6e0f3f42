"""Driver used by the lab tests: asserts the job's Ray cluster is what the job asked for.

argv: EXPECTED_NODES [EXIT_CODE]. Prints one JSON line with what it saw.
"""

import json
import os
import socket
import sys

import ray

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def probe() -> dict:
    return {
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "pidns": os.readlink("/proc/self/ns/pid"),
        "tmp": os.stat("/tmp").st_ino,
    }


def main() -> int:
    expected = int(sys.argv[1])
    exit_code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    branch = init_ray()
    job_tag = f"slurm_job_{os.environ['SLURM_JOB_ID']}"
    nodes = [n for n in ray.nodes() if n["Alive"]]
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    seen = ray.get([probe.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote() for n in nodes])
    report = {
        "branch": branch,
        "nodes": len(nodes),
        "ips": sorted(s["ip"] for s in seen),
        "hosts": sorted(s["host"] for s in seen),
        "pidns": len({s["pidns"] for s in seen}),
        "tags": all("slurm_managed_ray_cluster" in n["Resources"] and job_tag in n["Resources"] for n in nodes),
        "ray_address": os.environ.get("RAY_ADDRESS"),
        "node_types": sorted(k for n in nodes for k in n["Resources"] if k.startswith("node_type:")),
        "cpus_by_ip": {n["NodeManagerAddress"]: n["Resources"].get("CPU", 0) for n in nodes},
        "driver_ip": ray.util.get_node_ip_address(),
    }
    print("REPORT " + json.dumps(report), flush=True)
    assert branch == "slurm_managed", branch
    assert len(nodes) == expected, report
    assert len(set(report["ips"])) == expected, report
    assert report["tags"], report
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
