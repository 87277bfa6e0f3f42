"""The smallest slurm-rl experiment: attach to the job's Ray, run a task on every node.

slurm-rl run examples/hello.py                                  # local Ray
slurm-rl submit cluster_specs/lab.json examples/hello.py -N 3 --wait
"""

import socket

import ray

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def where() -> str:
    return f"{socket.gethostname()} {ray.util.get_node_ip_address()}"


def main() -> None:
    branch = init_ray()
    nodes = [n for n in ray.nodes() if n["Alive"]]
    print(f"init_ray: {branch}; {len(nodes)} Ray node(s), {ray.cluster_resources().get('CPU', 0):g} CPUs")
    refs = [
        where.options(
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote()
        for n in nodes
    ]
    for line in sorted(ray.get(refs)):
        print("  hello from", line)


if __name__ == "__main__":
    main()
