"""GRPO, end to end, on a verifiable toy task: a tiny torch policy learns to add two digits.

    slurm-rl run examples/grpo.py                                      # embedded local Ray
    slurm-rl submit cluster_specs/lab.json examples/grpo.py --nodes 3  # one worker pair per node

The single-controller pattern of NeMo RL: this driver owns the loop; two worker groups share
one virtual cluster (colocated, each worker half a bundle):

- generation workers sample G answers per prompt (``BatchedDataDict.repeat_interleave``),
- a verifier scores them (exact sum: 1; off by one: 0.25; else 0),
- the driver computes GRPO advantages (reward minus its group's mean, over the group's std),
- policy workers (data-parallel, torch.distributed gloo via ``collective``, gradients
  all-reduced by DDP) take a clipped policy-gradient step on their shard,
- the new weights go to the generation workers through the object store: the policy's
  ``state_dict`` call returns one object that every generation worker reads (never re-put).

Every ``--checkpoint-every`` steps (and when SLURM warns of the time limit) the run writes a
checkpoint into ``slurm_rl.run_dir()`` atomically (the job dir; with ``--chain K`` the chain's
shared dir): model, optimizer, RNG states and the next step. On the warning it then asks to be
requeued (``slurm_rl.requeue()``); the next attempt, or the chain's next job, resumes from it.
Prompts and sampling noise are drawn from (seed, step, rank), so a resumed run follows the same
path as an uninterrupted one. Metrics go to ``metrics.jsonl`` and, at the end, PNGs
(``slurm-rl plot JOBID`` redraws them).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import ray
import torch

import slurm_rl
from slurm_rl.distributed import BatchedDataDict, RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup, init_ray

DIGITS = 10
ANSWERS = 2 * DIGITS - 1


class PolicyNet(torch.nn.Module):
    """Two digits in, a distribution over the 19 possible sums out."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(DIGITS, hidden)
        self.mlp = torch.nn.Sequential(
            torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, ANSWERS)
        )

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.embed(a) + self.embed(b))  # order-free, as addition is


def generator(seed: int, step: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + stream)


def prompts(seed: int, step: int, count: int) -> BatchedDataDict:
    g = generator(seed, step, 0)
    return BatchedDataDict(
        {"a": torch.randint(0, DIGITS, (count,), generator=g), "b": torch.randint(0, DIGITS, (count,), generator=g)}
    )


def verify(a: torch.Tensor, b: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
    """The verifier: 1 for the exact sum, 0.25 when off by one, else 0."""
    off = (answer - (a + b)).abs()
    return torch.where(off == 0, 1.0, torch.where(off == 1, 0.25, 0.0))


def grpo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    grouped = rewards.view(-1, group_size)
    return ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)


class GenerationWorker:
    def __init__(self, seed: int) -> None:
        torch.set_num_threads(1)
        self.seed, self.model = seed, PolicyNet()

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)

    def generate(self, batch: BatchedDataDict, step: int) -> BatchedDataDict:
        with torch.no_grad():
            logits = self.model(batch["a"], batch["b"])
            probs = torch.softmax(logits, -1)
            g = generator(self.seed, step, 1 + int(os.environ.get("RANK", "0")))
            answer = torch.multinomial(probs, 1, generator=g).squeeze(1)
            logprob = torch.log_softmax(logits, -1).gather(1, answer[:, None]).squeeze(1)
        return BatchedDataDict({"a": batch["a"], "b": batch["b"], "answer": answer, "logprob": logprob})


class PolicyWorker:
    def __init__(self, seed: int, lr: float) -> None:
        from slurm_rl.distributed.collective import init_process_group

        torch.set_num_threads(1)
        torch.manual_seed(seed)  # the same initial weights on every rank
        self.backend = init_process_group()
        self.lr = lr
        self._wrap(PolicyNet())

    def _wrap(self, net: PolicyNet) -> None:
        from slurm_rl.distributed.collective import wrap_ddp

        self.model = wrap_ddp(net)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.lr)

    def on_group_restart(self) -> None:
        """After a restart (slurm-rl's new rendezvous): rejoin, keep the weights and optimizer."""
        from slurm_rl.distributed.collective import init_process_group

        state, opt_state = self.model.module.state_dict(), self.opt.state_dict()
        init_process_group()
        self._wrap(self.model.module)
        self.model.module.load_state_dict(state)
        self.opt.load_state_dict(opt_state)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.module.state_dict().items()}

    def train(self, batch: BatchedDataDict, clip: float = 0.2) -> dict[str, float]:
        logits = self.model(batch["a"], batch["b"])
        logprob = torch.log_softmax(logits, -1).gather(1, batch["answer"][:, None]).squeeze(1)
        ratio = torch.exp(logprob - batch["logprob"])
        adv = batch["advantage"]
        loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
        self.opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients across the policy ranks
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), float("inf"))
        self.opt.step()
        entropy = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1).mean()
        return {"loss": float(loss.detach()), "grad_norm": float(grad_norm), "entropy": float(entropy.detach())}

    def save(self, path: str, extra: dict[str, Any]) -> None:
        """Model, optimizer and RNG states plus ``extra``, written to a temp file then renamed."""
        tmp = f"{path}.tmp-{os.getpid()}"
        torch.save(
            {
                "model": self.model.module.state_dict(),
                "optimizer": self.opt.state_dict(),
                "torch_rng": torch.get_rng_state(),
                **extra,
            },
            tmp,
        )
        os.replace(tmp, path)

    def load(self, path: str) -> dict[str, Any]:
        state = torch.load(path, weights_only=False)
        self.model.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        return {k: v for k, v in state.items() if k not in ("model", "optimizer", "torch_rng")}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    p.add_argument("--prompts", type=int, default=64, help="prompts per step (default 64)")
    p.add_argument("--group-size", type=int, default=8, help="answers sampled per prompt, G (default 8)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers-per-node", type=int, default=1, help="policy (and generation) workers per node")
    p.add_argument("--checkpoint-every", type=int, default=10, help="checkpoint every K steps (default 10)")
    p.add_argument(
        "--out",
        default=None,
        help="where checkpoints and metrics go (default: slurm_rl.run_dir(): the job dir, or a chain's shared dir)",
    )
    p.add_argument(
        "--health-every",
        type=int,
        default=50,
        help="print the workers' status and usage tables every N steps and at the end (default 50)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNGs at the end")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    # a chain's (--chain) shared run dir, else the job dir: where the checkpoint survives the job
    out = Path(args.out or os.environ.get("SLURM_RL_RUN_DIR") or os.environ.get("SLURM_RL_JOB_DIR") or "grpo-out")
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / "grpo_checkpoint.pt"
    metrics = slurm_rl.MetricsLog(out)
    warned: list[float] = []
    slurm_rl.on_preempt(lambda: warned.append(time.time()))

    init_ray()
    need = 2 * args.workers_per_node  # each bundle holds a policy and a generation worker, 1 CPU each
    nodes = sorted({n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= need})
    if not nodes:
        raise SystemExit(
            f"grpo.py: no Ray node has {need} CPUs for --workers-per-node {args.workers_per_node} "
            f"(a policy and a generation worker share each bundle); lower --workers-per-node"
        )
    world = len(nodes) * args.workers_per_node
    if args.prompts % world:  # every data-parallel rank gets the same number of prompts
        args.prompts += world - args.prompts % world
        print(f"{args.prompts} prompts per step: a multiple of the {world} data-parallel workers", flush=True)
    cluster = RayVirtualCluster(
        [args.workers_per_node] * len(nodes),
        use_gpus=False,
        enable_colocation=True,
        communication_backend="gloo",
        name="grpo",
    )
    policy = RayWorkerGroup(
        cluster, RayWorkerBuilder(PolicyWorker, args.seed, args.lr), name_prefix="policy", restart_on_failure=True
    )
    generation = RayWorkerGroup(cluster, RayWorkerBuilder(GenerationWorker, args.seed), name_prefix="generation")
    start = 0
    if checkpoint.exists():
        start = policy.get_results(policy.run_all_workers_single_data("load", str(checkpoint)))[0]["next_step"]
        print(f"resuming from {checkpoint} at step {start}", flush=True)
    weights = policy.run_single_worker_single_data("state_dict", 0)  # one object, read by every generation worker
    generation.get_results(generation.run_all_workers_single_data("load_weights", weights))
    metrics.event("workers_ready", policy=policy.world_size, generation=generation.world_size)

    def save(next_step: int) -> None:
        policy.get_results([policy.run_single_worker_single_data("save", 0, str(checkpoint), {"next_step": next_step})])

    try:
        from rich.progress import Progress

        with Progress(transient=False) as bar:
            task = bar.add_task("GRPO", total=args.steps, completed=start)
            for step in range(start, args.steps):
                t0 = time.perf_counter()
                batch = prompts(args.seed, step, args.prompts).repeat_interleave(args.group_size)
                rollout = BatchedDataDict.from_batches(
                    generation.get_all_worker_results(
                        generation.run_all_workers_multiple_data(
                            "generate", batch.shard_by_batch_size(world), common_kwargs={"step": step}
                        )
                    )
                )
                rewards = verify(rollout["a"], rollout["b"], rollout["answer"])
                rollout["advantage"] = grpo_advantages(rewards, args.group_size)
                losses = policy.get_all_worker_results(
                    policy.run_all_workers_multiple_data("train", rollout.shard_by_batch_size(world))
                )
                weights = policy.run_single_worker_single_data("state_dict", 0)
                generation.get_results(generation.run_all_workers_single_data("load_weights", weights))
                reward = float(rewards.mean())
                accuracy = float((rewards == 1.0).float().mean())
                seconds = time.perf_counter() - t0
                metrics.log(
                    step=step,
                    reward=reward,
                    accuracy=accuracy,
                    # The clipped loss of an on-policy step is -mean(advantage), ~0 by construction
                    # (advantages are normalized per group): log what moves as the policy learns.
                    entropy=sum(m["entropy"] for m in losses) / len(losses),
                    grad_norm=sum(m["grad_norm"] for m in losses) / len(losses),
                    step_s=seconds,
                )
                bar.update(task, advance=1, description=f"GRPO step {step} reward {reward:.3f} acc {accuracy:.2f}")
                print(f"step {step:3d}  reward {reward:.3f}  accuracy {accuracy:.2f}  {seconds:.2f} s", flush=True)
                if (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps:
                    save(step + 1)
                if (step + 1) % args.health_every == 0 and step + 1 < args.steps:
                    policy.print_worker_status()
                    policy.print_resource_usage()
                if warned:
                    save(step + 1)
                    print(f"time-limit warning: checkpoint at step {step + 1}; asking to be requeued", flush=True)
                    slurm_rl.requeue(f"time-limit warning at step {step + 1}")
        policy.print_worker_status()
        policy.print_resource_usage()
    finally:
        policy.shutdown(force=True)
        generation.shutdown(force=True)
        cluster.shutdown()
    if not args.no_plots:
        for png in slurm_rl.plot_job(out):
            print(f"wrote {png}")


if __name__ == "__main__":
    main()
