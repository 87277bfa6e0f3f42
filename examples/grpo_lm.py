"""GRPO on a language model, end to end: a small decoder-only transformer learns multi-digit
addition, generating its answer token by token.

    slurm-rl run examples/grpo_lm.py                                      # embedded local Ray
    slurm-rl submit cluster_specs/lab.json examples/grpo_lm.py --nodes 3  # a worker pair per node

The pieces of LLM post-training, small enough for 2 CPU cores (plain torch, no download):

- a character tokenizer and a decoder-only transformer (``TinyLM``: pre-norm blocks, learned
  positions) with a KV cache; the task ``"37+48="`` -> ``"580$"`` (the sum's three digits,
  least-significant first, as carries flow: the usual way small transformers learn arithmetic);
- a short supervised warm start (teacher-forced cross-entropy until 30% of a probe set is
  answered exactly, ``--sft-target``) on the data-parallel policy workers, as real pipelines
  start RL from an SFT model; its weights become the frozen reference;
- generation workers sample G answers per prompt token by token, each new token attending to
  the cached keys and values of the ones before (``generate``);
- a verifier scores them (1 for the exact sum, else 0.1 per digit in place); GRPO advantages
  are each reward minus its group's mean over the group's std;
- policy workers (torch.distributed gloo, DDP) recompute token log-probabilities, then take
  ``--minibatches`` clipped-surrogate steps with a KL penalty against the reference (k3);
- the new weights go to the generation workers through the object store each step;
- held-out accuracy (greedy, on 200 problems never trained on) every ``--eval-every`` steps.

Checkpoints, the time-limit warning and ``--chain`` work as in ``grpo.py``. Metrics go to
``metrics.jsonl``, TensorBoard and W&B where configured (``slurm_rl.MetricsLog``).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import torch
import torch.nn.functional as F

import slurm_rl
from slurm_rl.distributed import BatchedDataDict, RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup, init_ray

VOCAB = "0123456789+=$_"  # "$": end of answer, "_": padding
EOS, PAD = VOCAB.index("$"), VOCAB.index("_")
PROMPT_LEN, ANSWER_LEN = 6, 4  # "ab+cd=" and three digits plus "$"
HELD_OUT = 200  # problems never trained on, for the accuracy that counts


def encode(text: str) -> list[int]:
    return [VOCAB.index(c) for c in text]


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def prompt_text(a: int, b: int) -> str:
    return f"{a:02d}+{b:02d}="


def answer_text(a: int, b: int) -> str:
    return f"{a + b:03d}"[::-1] + "$"


def held_out_pairs(seed: int = 1234) -> torch.Tensor:
    """The held-out problems: HELD_OUT of the 10,000 (a, b), fixed, never trained on."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(100 * 100, generator=g)[:HELD_OUT]
    return torch.stack([ids // 100, ids % 100], 1)


def training_pairs(count: int, g: torch.Generator, held: torch.Tensor) -> torch.Tensor:
    """``count`` random (a, b), none of them held out."""
    banned = torch.zeros(100 * 100, dtype=torch.bool)
    banned[held[:, 0] * 100 + held[:, 1]] = True
    out = torch.empty(0, 2, dtype=torch.long)
    while len(out) < count:
        ids = torch.randint(0, 100 * 100, (2 * count,), generator=g)
        ids = ids[~banned[ids]]
        out = torch.cat([out, torch.stack([ids // 100, ids % 100], 1)])
    return out[:count]


def prompt_ids(pairs: torch.Tensor) -> torch.Tensor:
    return torch.tensor([encode(prompt_text(int(a), int(b))) for a, b in pairs.tolist()])


def reward(pairs: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
    """The verifier: 1 for the exact sum (then "$"); else 0.1 per digit in its right place."""
    out = []
    for (a, b), ids in zip(pairs.tolist(), completions.tolist()):
        want, got = answer_text(a, b), decode(ids)
        exact = got == want
        out.append(1.0 if exact else 0.1 * sum(x == y for x, y in zip(got[:3], want[:3])))
    return torch.tensor(out)


@dataclass(frozen=True)
class LMConfig:
    vocab: int = len(VOCAB)
    context: int = PROMPT_LEN + ANSWER_LEN
    dim: int = 96
    heads: int = 4
    layers: int = 2


class Attention(torch.nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = cfg.heads, cfg.dim // cfg.heads
        self.qkv = torch.nn.Linear(cfg.dim, 3 * cfg.dim)
        self.out = torch.nn.Linear(cfg.dim, cfg.dim)

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch, length, dim = x.shape
        q, k, v = (t.view(batch, length, self.heads, self.head_dim).transpose(1, 2) for t in self.qkv(x).split(dim, 2))
        if cache is not None:  # the keys and values of every earlier position, computed once
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        # causal within the new positions; every cached position is earlier than all of them
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and length > 1)
        return self.out(y.transpose(1, 2).reshape(batch, length, dim)), (k, v)


class Block(torch.nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(cfg.dim), torch.nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(cfg.dim, 4 * cfg.dim), torch.nn.GELU(), torch.nn.Linear(4 * cfg.dim, cfg.dim)
        )

    def forward(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        attended, cache = self.attn(self.norm1(x), cache)
        x = x + attended
        return x + self.mlp(self.norm2(x)), cache


class TinyLM(torch.nn.Module):
    """A decoder-only transformer (pre-norm, learned positions) over the character vocabulary."""

    def __init__(self, cfg: LMConfig = LMConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = torch.nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = torch.nn.Embedding(cfg.context, cfg.dim)
        self.blocks = torch.nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = torch.nn.LayerNorm(cfg.dim)
        self.head = torch.nn.Linear(cfg.dim, cfg.vocab)

    def forward(
        self, ids: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        start = 0 if cache is None else cache[0][0].shape[2]
        x = self.tok(ids) + self.pos(torch.arange(start, start + ids.shape[1]))
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i])
            new_cache.append(kv)
        return self.head(self.norm(x)), new_cache


@torch.no_grad()
def generate(
    model: TinyLM, prompts: torch.Tensor, g: torch.Generator | None, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ANSWER_LEN tokens after each prompt, one at a time, reusing the KV cache (greedy
    when ``g`` is None). Returns (completions, their log-probabilities); after "$" only padding."""
    logits, cache = model(prompts)
    tokens, logprobs = [], []
    done = torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(ANSWER_LEN):
        logp = torch.log_softmax(logits[:, -1] / temperature, -1)
        nxt = logp.argmax(-1) if g is None else torch.multinomial(logp.exp(), 1, generator=g).squeeze(1)
        picked = logp.gather(1, nxt[:, None]).squeeze(1)
        nxt = torch.where(done, PAD, nxt)
        tokens.append(nxt)
        logprobs.append(torch.where(done, 0.0, picked))
        done |= nxt == EOS
        logits, cache = model(nxt[:, None], cache)  # one new position: attend to the cache
    return torch.stack(tokens, 1), torch.stack(logprobs, 1)


def completion_mask(completions: torch.Tensor) -> torch.Tensor:
    """1 for every generated token up to and including "$", 0 for the padding after it."""
    ended_before = torch.cumsum((completions == EOS).long(), 1) - (completions == EOS).long()
    return ((ended_before == 0) & (completions != PAD)).float()


def token_logprobs(model: torch.nn.Module, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
    """log p(completion token | everything before it), one full causal forward pass."""
    ids = torch.cat([prompts, completions], 1)
    logits, _ = model(ids[:, :-1])
    logp = torch.log_softmax(logits[:, prompts.shape[1] - 1 :], -1)
    return logp.gather(2, completions[:, :, None]).squeeze(2)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    kl_coef: float = 0.05,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level clipped surrogate (one advantage per sequence) plus beta * KL(policy || ref)
    (the k3 estimator), averaged over the answer tokens."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None]
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    log_ref_ratio = ref_logp - logp
    kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
    per_token = -(surrogate - kl_coef * kl)
    tokens = mask.sum().clamp(min=1)
    loss = (per_token * mask).sum() / tokens
    clipped = (((ratio - 1).abs() > clip).float() * mask).sum() / tokens
    return loss, {"kl": float((kl * mask).sum().detach() / tokens), "clip_frac": float(clipped)}


def sft_loss(model: torch.nn.Module, pairs: torch.Tensor) -> torch.Tensor:
    """Teacher-forced cross-entropy on the answer tokens (the warm start)."""
    prompts = prompt_ids(pairs)
    answers = torch.tensor([encode(answer_text(int(a), int(b))) for a, b in pairs.tolist()])
    return -token_logprobs(model, prompts, answers).mean()


def cosine(step: int, total: int, base: float) -> float:
    return base * 0.5 * (1 + math.cos(math.pi * min(step, total) / max(total, 1)))


def generator(seed: int, step: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + stream)


def grpo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    grouped = rewards.view(-1, group_size)
    return ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)


def as_batch(pairs: torch.Tensor) -> BatchedDataDict:
    return BatchedDataDict({"a": pairs[:, 0].contiguous(), "b": pairs[:, 1].contiguous()})


class GenerationWorker:
    """Holds a copy of the policy; samples answers token by token with a KV cache."""

    def __init__(self, seed: int) -> None:
        torch.set_num_threads(1)
        self.seed, self.model = seed, TinyLM().eval()

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)

    def generate(self, batch: BatchedDataDict, step: int, greedy: bool = False) -> BatchedDataDict:
        pairs = torch.stack([batch["a"], batch["b"]], 1)
        g = None if greedy else generator(self.seed, step, 1 + int(os.environ.get("RANK", "0")))
        completion, logprob = generate(self.model, prompt_ids(pairs), g)
        return BatchedDataDict({"a": batch["a"], "b": batch["b"], "completion": completion, "logprob": logprob})


class PolicyWorker:
    """One data-parallel rank: the trained policy (DDP over gloo) and the frozen reference."""

    def __init__(self, seed: int, lr: float) -> None:
        from slurm_rl.distributed.collective import init_process_group, wrap_ddp

        torch.set_num_threads(1)
        torch.manual_seed(seed)  # the same initial weights on every rank
        self.backend = init_process_group()
        self.seed, self.lr = seed, lr
        self.model = wrap_ddp(TinyLM())
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.reference = copy.deepcopy(self.model.module).eval()

    def warm_start(self, max_steps: int, batch_size: int, lr: float, target: float) -> dict[str, float]:
        """Supervised steps on correct answers (each rank its own problems) until greedy answers
        to a fixed probe set are ``target`` right (checked every 10 steps; the same weights and
        probe on every rank, so every rank stops at the same step); the result becomes the
        frozen reference and the start of RL."""
        rank = int(os.environ.get("RANK", "0"))
        g = generator(self.seed, -1, 100 + rank)
        opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        held = held_out_pairs()
        probe = training_pairs(128, generator(self.seed, -2, 0), held)
        steps, probe_accuracy, loss = 0, 0.0, torch.tensor(0.0)
        while steps < max_steps:
            loss = sft_loss(self.model, training_pairs(batch_size, g, held))
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients over the ranks
            opt.step()
            steps += 1
            if steps % 10 == 0:
                completion, _ = generate(self.model.module, prompt_ids(probe), None)
                probe_accuracy = float((reward(probe, completion) == 1.0).float().mean())
                if probe_accuracy >= target:
                    break
        self.reference = copy.deepcopy(self.model.module).eval()
        return {"sft_loss": float(loss.detach()), "sft_steps": steps, "probe_accuracy": probe_accuracy}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.module.state_dict().items()}

    def train(self, batch: BatchedDataDict, minibatches: int, clip: float, kl_coef: float) -> dict[str, float]:
        pairs = torch.stack([batch["a"], batch["b"]], 1)
        prompts, completion = prompt_ids(pairs), batch["completion"]
        mask = completion_mask(completion)
        with torch.no_grad():  # the policy that sampled (same weights) and the reference
            old = token_logprobs(self.model.module, prompts, completion)
            ref = token_logprobs(self.reference, prompts, completion)
        infos = []
        for part in range(minibatches):
            idx = torch.arange(len(pairs))[part::minibatches]
            logp = token_logprobs(self.model, prompts[idx], completion[idx])
            loss, info = grpo_loss(logp, old[idx], ref[idx], batch["advantage"][idx], mask[idx], clip, kl_coef)
            self.opt.zero_grad()
            loss.backward()  # DDP all-reduces the gradients across the policy ranks
            info["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0))
            self.opt.step()
            infos.append(info)
        return {k: sum(i[k] for i in infos) / len(infos) for k in infos[0]}

    def save(self, path: str, extra: dict[str, Any]) -> None:
        """Policy, reference, optimizer and RNG states plus ``extra``, to a temp file then renamed."""
        tmp = f"{path}.tmp-{os.getpid()}"
        torch.save(
            {
                "model": self.model.module.state_dict(),
                "reference": self.reference.state_dict(),
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
        self.reference.load_state_dict(state["reference"])
        self.opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        return {k: v for k, v in state.items() if k not in ("model", "reference", "optimizer", "torch_rng")}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="GRPO steps (default 300)")
    p.add_argument("--sft-steps", type=int, default=600, help="at most this many warm-start steps (default 600)")
    p.add_argument(
        "--sft-target", type=float, default=0.3, help="warm start until this share of answers is exact (default 0.3)"
    )
    p.add_argument("--prompts", type=int, default=32, help="prompts per step (default 32)")
    p.add_argument("--group-size", type=int, default=8, help="answers sampled per prompt, G (default 8)")
    p.add_argument("--lr", type=float, default=1e-3, help="GRPO learning rate (default 1e-3)")
    p.add_argument("--sft-lr", type=float, default=2e-3, help="warm-start learning rate (default 2e-3)")
    p.add_argument("--minibatches", type=int, default=2, help="policy updates per step (default 2)")
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--kl-coef", type=float, default=0.05, help="weight of KL(policy || reference) (default 0.05)")
    p.add_argument("--eval-every", type=int, default=25, help="held-out accuracy every N steps (default 25)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers-per-node", type=int, default=1, help="policy (and generation) workers per node")
    p.add_argument("--checkpoint-every", type=int, default=25, help="checkpoint every K steps (default 25)")
    p.add_argument("--out", default=None, help="checkpoints and metrics (default: slurm_rl.run_dir())")
    p.add_argument("--no-plots", action="store_true", help="skip the PNGs at the end")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    out = Path(args.out or os.environ.get("SLURM_RL_RUN_DIR") or os.environ.get("SLURM_RL_JOB_DIR") or "grpo-lm-out")
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / "grpo_lm_checkpoint.pt"
    metrics = slurm_rl.MetricsLog(out)
    warned: list[float] = []
    slurm_rl.on_preempt(lambda: warned.append(time.time()))

    init_ray()
    need = 2 * args.workers_per_node  # each bundle holds a policy and a generation worker, 1 CPU each
    nodes = sorted({n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= need})
    if not nodes:
        raise SystemExit(f"grpo_lm.py: no Ray node has {need} CPUs for --workers-per-node {args.workers_per_node}")
    world = len(nodes) * args.workers_per_node
    if args.prompts % world:  # every data-parallel rank gets the same number of prompts
        args.prompts += world - args.prompts % world
    cluster = RayVirtualCluster(
        [args.workers_per_node] * len(nodes),
        use_gpus=False,
        enable_colocation=True,
        communication_backend="gloo",
        name="grpo_lm",
    )
    policy = RayWorkerGroup(cluster, RayWorkerBuilder(PolicyWorker, args.seed, args.lr), name_prefix="policy")
    generation = RayWorkerGroup(cluster, RayWorkerBuilder(GenerationWorker, args.seed), name_prefix="generation")
    held = as_batch(held_out_pairs())
    print(f"{world} policy workers (data-parallel) and {world} generation workers on {len(nodes)} node(s)", flush=True)

    def sync_weights() -> None:
        weights = policy.run_single_worker_single_data("state_dict", 0)  # one object, read by every generation worker
        generation.get_results(generation.run_all_workers_single_data("load_weights", weights))

    def held_out_accuracy() -> float:
        shards = held.shard_by_batch_size(world, allow_uneven_shards=True)
        answers = BatchedDataDict.from_batches(
            generation.get_all_worker_results(
                generation.run_all_workers_multiple_data("generate", shards, common_kwargs={"step": 0, "greedy": True})
            )
        )
        pairs = torch.stack([answers["a"], answers["b"]], 1)
        return float((reward(pairs, answers["completion"]) == 1.0).float().mean())

    def save(next_step: int, start_accuracy: float) -> None:
        extra = {"next_step": next_step, "start_accuracy": start_accuracy}
        policy.get_results([policy.run_single_worker_single_data("save", 0, str(checkpoint), extra)])

    try:
        if checkpoint.exists():
            state = policy.get_results(policy.run_all_workers_single_data("load", str(checkpoint)))[0]
            start, start_accuracy = state["next_step"], state["start_accuracy"]
            print(f"resuming from {checkpoint} at step {start}", flush=True)
            sync_weights()
        else:
            t0 = time.perf_counter()
            sft = policy.get_results(
                policy.run_all_workers_single_data(
                    "warm_start", args.sft_steps, max(1, 64 // world), args.sft_lr, args.sft_target
                )
            )[0]
            sync_weights()
            start, start_accuracy = 0, held_out_accuracy()
            metrics.event("warm_start_done", heldout_accuracy=start_accuracy, seconds=time.perf_counter() - t0)
            print(
                f"warm start: {sft['sft_steps']} supervised steps (loss {sft['sft_loss']:.3f}), held-out accuracy "
                f"{start_accuracy:.3f} ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
            metrics.log(step=0, heldout_accuracy=start_accuracy)
        accuracy_now = start_accuracy
        for step in range(start, args.steps):
            t0 = time.perf_counter()
            pairs = training_pairs(args.prompts, generator(args.seed, step, 0), held_out_pairs())
            batch = as_batch(pairs).repeat_interleave(args.group_size)
            rollout = BatchedDataDict.from_batches(
                generation.get_all_worker_results(
                    generation.run_all_workers_multiple_data(
                        "generate", batch.shard_by_batch_size(world), common_kwargs={"step": step}
                    )
                )
            )
            rewards = reward(torch.stack([rollout["a"], rollout["b"]], 1), rollout["completion"])
            rollout["advantage"] = grpo_advantages(rewards, args.group_size)
            infos = policy.get_all_worker_results(
                policy.run_all_workers_multiple_data(
                    "train",
                    rollout.shard_by_batch_size(world),
                    common_kwargs={"minibatches": args.minibatches, "clip": args.clip, "kl_coef": args.kl_coef},
                )
            )
            sync_weights()
            row: dict[str, Any] = {
                "step": step + 1,
                "reward": float(rewards.mean()),
                "accuracy": float((rewards == 1.0).float().mean()),
                **{k: sum(i[k] for i in infos) / len(infos) for k in infos[0]},
            }
            if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
                accuracy_now = row["heldout_accuracy"] = held_out_accuracy()
            row["step_s"] = time.perf_counter() - t0
            metrics.log(**row)
            print(
                f"step {step + 1:3d}  reward {row['reward']:.3f}  accuracy {row['accuracy']:.2f}  kl {row['kl']:.3f}"
                + (f"  held-out {row['heldout_accuracy']:.3f}" if "heldout_accuracy" in row else "")
                + f"  {row['step_s']:.2f} s",
                flush=True,
            )
            if (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps:
                save(step + 1, start_accuracy)
            if warned and step + 1 < args.steps:
                save(step + 1, start_accuracy)
                print(f"time-limit warning: checkpoint at step {step + 1}; asking to be requeued", flush=True)
                slurm_rl.requeue(f"time-limit warning at step {step + 1}")
        print(
            f"held-out accuracy: {start_accuracy:.3f} after the warm start, {accuracy_now:.3f} after GRPO", flush=True
        )
        metrics.close()
    finally:
        policy.shutdown(force=True)
        generation.shutdown(force=True)
        cluster.shutdown()
    if not args.no_plots:
        for png in slurm_rl.plot_job(out):
            print(f"wrote {png}")


if __name__ == "__main__":
    main()
