"""One point of a sweep: a Ray task on every node of the task's own cluster, three logged
steps whose loss depends on --lr and --seed, and exit 3 at the point --fail-at names."""

import argparse
import os
import sys

import ray

import slurm_rl
from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def node_name() -> str:
    return os.uname().nodename


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--fail-at", default="", help="LR:SEED of the point that fails")
    args = p.parse_args()
    init_ray()
    nodes = sorted(ray.get([node_name.remote() for _ in range(4)]))
    print(f"point lr={args.lr} seed={args.seed} nodes={sorted(set(nodes))} file={os.path.realpath(__file__)}")
    log = slurm_rl.MetricsLog(os.environ["SLURM_RL_JOB_DIR"], tensorboard=False)
    for step in range(3):
        log.log(step=step, loss=args.seed + args.lr / (step + 1))
    log.close()
    if args.fail_at == f"{args.lr:g}:{args.seed}":
        print("failing as asked", flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
