"""NeMo RL workloads unchanged: @ray.remote worker classes, a class or a name in place of a
builder, the documentation's core usage examples as written, sharded dispatch, dp helpers, and
workers that fail to build. Local Ray declaring 24 logical GPUs (``many_gpu_ray``, no GPU needed)."""

from __future__ import annotations

import time

import pytest
import ray
import torch

from slurm_rl.distributed import (
    BatchedDataDict,
    NamedSharding,
    RayVirtualCluster,
    RayWorkerBuilder,
    RayWorkerGroup,
    ShardingError,
    WorkerBuildError,
)
from slurm_rl.distributed import virtual_cluster as vc
from tests.unit.workers.nemo_style import (
    DecoratedWithOptions,
    DecoratedWorker,
    GenerationWorker,
    HuggingFacePolicyWorker,
    PolicyWorker,
    ShardWorker,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
W = "tests.unit.workers.nemo_style"


def _gone(name: str) -> bool:
    try:
        ray.get_actor(name)
        return False
    except ValueError:
        return True


# ---- the documentation's usage examples, as written -------------------------------------------
def test_doc_cluster_examples(many_gpu_ray) -> None:
    # Single GPU setup / multi-GPU single node / multi-node / heterogeneous
    for shape in ([1], [8], [8, 8], [4, 8, 2]):
        cluster = RayVirtualCluster(shape)
        assert cluster.world_size() == sum(shape) and len(cluster.get_placement_groups()) == len(shape)
        cluster.shutdown()
    cluster = RayVirtualCluster(**{"bundle_ct_per_node_list": [2]})
    assert cluster.world_size() == 2
    cluster.shutdown()


def test_doc_worker_group_example(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([4])
    policy_workers = RayWorkerGroup(cluster, HuggingFacePolicyWorker)
    try:
        batch = BatchedDataDict({"input": ["a", "b"]})
        losses = policy_workers.run_all_workers_single_data("train_step", batch)
        assert len(ray.get(losses)) == 4
        prompt1, prompt2, prompt3, prompt4 = "p1", "p2", "p3", "p4"
        with pytest.warns(UserWarning, match="not SlicedDataDict"):
            generations = policy_workers.run_all_workers_multiple_data("generate", [prompt1, prompt2, prompt3, prompt4])
        assert policy_workers.get_all_worker_results(generations) == ["p1 -> ok", "p2 -> ok", "p3 -> ok", "p4 -> ok"]
    finally:
        policy_workers.shutdown()
        cluster.shutdown()


def test_doc_batched_data_dict_example() -> None:
    batch = BatchedDataDict({"input_ids": torch.arange(6).reshape(3, 2), "reward": torch.tensor([1.0, 2.0, 3.0])})
    repeated = batch.repeat_interleave(2)
    assert repeated.size == 6 and repeated["reward"].tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    moved = repeated.to_device(torch.device("cpu"))
    assert moved["input_ids"].device.type == "cpu" and moved["input_ids"][1].tolist() == [0, 1]


class _Policy:
    def __init__(self, group: RayWorkerGroup) -> None:
        self.group = group

    def get_logprobs(self, generations):  # type: ignore[no-untyped-def]
        return [0.0] * len(generations["generated"])

    get_reference_logprobs = get_logprobs

    def train(self, generations, logprobs, reference_logprobs, loss_fn):  # type: ignore[no-untyped-def]
        return ray.get(self.group.run_all_workers_single_data("train_step", generations, loss_fn))


class _Generation:
    def __init__(self, group: RayWorkerGroup) -> None:
        self.group = group

    def generate(self, batch):  # type: ignore[no-untyped-def]
        shards = batch.shard_by_batch_size(self.group.world_size)
        parts = self.group.get_all_worker_results(self.group.run_all_workers_multiple_data("generate", shards))
        return BatchedDataDict.from_batches([BatchedDataDict(p) for p in parts])


class _Environment:
    """Rewards the sum a generation worker echoed back ("1+1 -> ok" is worth 2): only real
    worker output scores, and prompts score differently, so advantages are not all zero."""

    def step(self, generations):  # type: ignore[no-untyped-def]
        return [
            float(sum(map(int, g.removesuffix(" -> ok").split("+")))) if g.endswith(" -> ok") else -100.0
            for g in generations["generated"]
        ]


def test_doc_single_controller_loop(many_gpu_ray) -> None:
    """The documentation's grpo_train, as written, over two colocated worker groups."""
    num_generations_per_prompt = 2
    trained: list[object] = []

    class GRPOLossFn:
        pass

    def calculate_grpo_training_data(generations, logprobs, reference_logprobs, rewards):  # type: ignore[no-untyped-def]
        return {"advantages": [r - sum(rewards) / len(rewards) for r in rewards]}

    def grpo_train(policy, policy_generation, environment, dataloader):  # type: ignore[no-untyped-def]
        """Example of single controller pattern for GRPO training."""
        loss_fn = GRPOLossFn()  # noqa: F841 - the documentation writes it so

        for batch in dataloader:
            # Repeat batch for multiple generations per prompt
            batch.repeat_interleave(num_generations_per_prompt)

            # Generate responses using distributed workers
            generations = policy_generation.generate(batch)

            # Get rewards from environment
            rewards = environment.step(generations)

            # Get log probabilities for training
            logprobs = policy.get_logprobs(generations)
            reference_logprobs = policy.get_reference_logprobs(generations)

            # Calculate training data and update policy
            training_data = calculate_grpo_training_data(generations, logprobs, reference_logprobs, rewards)
            trained.append(training_data)
            policy.train(generations, logprobs, reference_logprobs, GRPOLossFn)

    cluster = RayVirtualCluster([2], max_colocated_worker_groups=2)
    policy = RayWorkerGroup(cluster, PolicyWorker, name_prefix="policy")
    generation = RayWorkerGroup(cluster, GenerationWorker, name_prefix="generation")
    try:
        dataloader = [BatchedDataDict({"input": ["1+1", "2+3"]}), BatchedDataDict({"input": ["4+4", "0+9"]})]
        grpo_train(_Policy(policy), _Generation(generation), _Environment(), dataloader)
        # The documentation discards repeat_interleave's result (NeMo RL's, like ours, returns a
        # new BatchedDataDict), so each prompt is generated once: [1+1, 2+3] -> rewards [2, 5]
        assert trained == [{"advantages": [-1.5, 1.5]}, {"advantages": [-0.5, 0.5]}]
        assert BatchedDataDict({"x": [1, 2]}).repeat_interleave(2)["x"] == [1, 1, 2, 2]
    finally:
        policy.shutdown()
        generation.shutdown()
        cluster.shutdown()


def test_doc_custom_worker(many_gpu_ray) -> None:
    def load_model(model_name: str) -> torch.nn.Module:
        return torch.nn.Linear(2, 1)

    class CustomPolicyWorker:
        def __init__(self, model_name: str = "tiny"):  # the documentation passes no arguments
            self.model = load_model(model_name)

        def train_step(self, batch, generations, rewards, loss_fn):  # type: ignore[no-untyped-def]
            """Custom training step implementation."""
            loss = loss_fn(self.model, batch, generations, rewards)
            return {"loss": loss.item()}

        def generate(self, batch):  # type: ignore[no-untyped-def]
            return [len(batch)]

    def loss_fn(model, batch, generations, rewards):  # type: ignore[no-untyped-def]
        return model(torch.ones(1, 2)).sum() * 0 + sum(rewards)

    cluster = RayVirtualCluster([2])
    worker_group = RayWorkerGroup(cluster, CustomPolicyWorker)
    try:
        out = ray.get(worker_group.run_all_workers_single_data("train_step", [1], [2], [0.5, 1.0], loss_fn))
        assert out == [{"loss": 1.5}, {"loss": 1.5}]
    finally:
        worker_group.shutdown()
        cluster.shutdown()


# ---- decorated classes, classes and names ------------------------------------------------------
@pytest.mark.parametrize(
    "worker",
    [
        DecoratedWorker,
        f"{W}.DecoratedWorker",
        RayWorkerBuilder(f"{W}.DecoratedWorker"),
        RayWorkerBuilder(DecoratedWorker),
    ],
    ids=["class", "fqn", "builder-fqn", "builder-class"],
)
def test_a_ray_remote_class_is_never_wrapped_twice(many_gpu_ray, worker) -> None:
    cluster = RayVirtualCluster([2], use_gpus=False)
    group = RayWorkerGroup(cluster, worker, name_prefix="dec")
    try:
        assert ray.get(group.run_all_workers_single_data("rank")) == ["0", "1"]
    finally:
        group.shutdown()
        cluster.shutdown()


@pytest.mark.parametrize(
    "worker",
    [DecoratedWithOptions, f"{W}.DecoratedWorker", ShardWorker],
    ids=["ray-remote-class", "fqn", "plain-class"],
)
def test_every_worker_has_execute_method_the_2026_way(many_gpu_ray, worker) -> None:
    """NeMo RL 2026's tests and code call w.execute_method.remote("name", *args) on any worker."""
    cluster = RayVirtualCluster([1], use_gpus=False)
    group = RayWorkerGroup(cluster, worker, name_prefix="exec")
    try:
        w = group.workers[0]
        method = "env" if worker is DecoratedWithOptions else ("rank" if isinstance(worker, str) else "call_count")
        args = ("RANK",) if method == "env" else ()
        assert ray.get(w.execute_method.remote(method, *args)) in ("0", 0)
    finally:
        group.shutdown()
        cluster.shutdown()


def test_decorator_options_stay_and_builder_and_configure_layer_on_top(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([2])
    group = RayWorkerGroup(cluster, RayWorkerBuilder(DecoratedWithOptions, tag="from-builder"), name_prefix="opt")
    try:
        w = group.workers[0]
        assert ray.get(w.env.remote("FROM_DECORATOR")) == "yes"  # the class's runtime_env kept
        assert ray.get(w.env.remote("LAYER")) == "configure-runtime-env"  # configure_worker's 4th item wins
        assert ray.get(w.env.remote("CONFIGURED")) == "yes" and ray.get(w.env.remote("RANK")) == "0"
        assert ray.get(w.get_tag.remote()) == "from-configure"  # init_kwargs over builder kwargs
        assert ray.get([w.meet.remote(), w.meet.remote()], timeout=30) == [True, True]  # max_concurrency=4 kept
    finally:
        group.shutdown()
        cluster.shutdown()


def test_group_env_vars_sit_between_the_class_and_the_groups_own_wiring(many_gpu_ray, monkeypatch) -> None:
    """NeMo RL 2026's precedence, lowest first: the class's @ray.remote runtime_env, the driver's
    environment when the group is made, RayWorkerGroup(env_vars=...), RANK/MASTER_ADDR/...,
    configure_worker."""
    monkeypatch.setenv("FROM_DECORATOR", "system")  # set after init_ray: still reaches the group
    monkeypatch.setenv("BOTH", "system")
    cluster = RayVirtualCluster([2])
    env_vars = {"BOTH": "group", "GROUP_ONLY": "g", "RANK": "99", "LAYER": "group", "CONFIGURED": "group"}
    group = RayWorkerGroup(cluster, DecoratedWithOptions, name_prefix="envs", env_vars=env_vars)
    try:
        w = group.workers[1]
        names = ("FROM_DECORATOR", "BOTH", "GROUP_ONLY", "RANK", "LAYER", "CONFIGURED")
        got = {k: ray.get(w.env.remote(k)) for k in names}
        assert got == {
            "FROM_DECORATOR": "system",  # the driver's environment over the class
            "BOTH": "group",  # env_vars over the driver's environment
            "GROUP_ONLY": "g",
            "RANK": "1",  # the group's wiring wins
            "LAYER": "configure-runtime-env",  # configure_worker wins
            "CONFIGURED": "yes",
        }
        assert env_vars["RANK"] == "99"  # the caller's dict is not changed
    finally:
        group.shutdown()
        cluster.shutdown()


@pytest.mark.parametrize("bad", [{"N": 3}, {"": "x"}, ["A=1"]])
def test_group_env_vars_must_be_strings(many_gpu_ray, bad) -> None:
    cluster = RayVirtualCluster([1], use_gpus=False)
    try:
        with pytest.raises(ValueError, match="env_vars"):
            RayWorkerGroup(cluster, ShardWorker, env_vars=bad)
    finally:
        cluster.shutdown()


def test_a_plain_class_object_works_in_place_of_a_builder(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([1], use_gpus=False)
    group = RayWorkerGroup(cluster, ShardWorker)
    try:
        assert ray.get(group.run_single_worker_single_data("work", 0, data=5)) == (0, 5, None)
    finally:
        group.shutdown()
        cluster.shutdown()
    with pytest.raises(TypeError, match="RayWorkerBuilder, a worker class"):
        RayWorkerGroup(RayVirtualCluster([1], use_gpus=False), 42)


# ---- seed semantics --------------------------------------------------------------------------
def test_empty_cluster_is_valid_and_prints_the_empty_grid(many_gpu_ray, capsys) -> None:
    cluster = RayVirtualCluster([])
    assert cluster.world_size() == 0 and cluster.node_count() == 0 and cluster.get_placement_groups() == []
    cluster.print_cluster_grid()
    assert capsys.readouterr().out.strip() == "Empty Ray Cluster (no GPUs)"
    with pytest.raises(ValueError, match="empty"):
        RayWorkerGroup(cluster, ShardWorker)
    assert cluster.shutdown() is True


def test_constructor_runs_no_ray_task(monkeypatch) -> None:
    """Tests replace _create_placement_groups_internal (each attempt of the constructor's); the
    master probe must not run until asked."""

    class FakePG:
        bundle_specs = ({"CPU": 1},)

    class Boom:
        def options(self, **_):
            raise AssertionError("a Ray task ran in RayVirtualCluster.__init__")

        remote = options

    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", lambda self, *a: [FakePG()])
    monkeypatch.setattr(vc.RayVirtualCluster, "_after_layout", lambda self: None)
    monkeypatch.setattr(vc, "_get_node_ip_and_free_port", Boom())
    cluster = vc.RayVirtualCluster([1], use_gpus=False)
    assert cluster.world_size() == 1
    cluster._node_placement_groups = []  # nothing real to remove


def test_retries_sleep_after_every_failed_attempt(monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "4")

    def short(self, strategy=None, use_unified_pg=False):
        raise vc.ResourceInsufficientError("GPU: need 9, cluster has 0")

    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", short)
    with pytest.raises(vc.ResourceInsufficientError, match=r"Maximum number of retries \(4\)"):
        vc.RayVirtualCluster([9])
    assert sleeps == [1, 2, 4, 8]
    made = []
    monkeypatch.setattr(vc.RayVirtualCluster, "_init_placement_groups", lambda self, *a, **k: made.append(1))
    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", lambda self, *a: [])
    vc.RayVirtualCluster([1], use_gpus=False)._init_placement_groups()
    assert made == [1, 1]  # the seed's contract: the constructor makes them (2026 counts 1: lazy=True)
    vc.RayVirtualCluster([1], use_gpus=False, lazy=True)._init_placement_groups()
    assert made == [1, 1, 1]


def test_a_direct_init_placement_groups_retries_by_itself_the_2026_way(monkeypatch) -> None:
    """NeMo RL 2026 calls cluster._init_placement_groups() itself; each attempt is
    _create_placement_groups_internal, with the same backoff as the constructor's."""
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "4")
    cluster = vc.RayVirtualCluster([], use_gpus=False)  # no bundles: nothing placed at construction
    cluster._node_placement_groups = None
    calls = []

    def short(self, strategy=None, use_unified_pg=False):
        calls.append(strategy)
        raise vc.ResourceInsufficientError("GPU: need 9, cluster has 0")

    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", short)
    with pytest.raises(vc.ResourceInsufficientError, match=r"Maximum number of retries \(4\)"):
        cluster._init_placement_groups()
    assert len(calls) == 4 and sleeps == [1, 2, 4, 8]
    cluster._node_placement_groups = ["already made"]
    assert cluster._init_placement_groups() == ["already made"]  # made once, then kept
    cluster._node_placement_groups = []


def test_sharding_errors_are_assertions_and_value_errors() -> None:
    batch = BatchedDataDict({"x": list(range(6))})
    for caught in (AssertionError, ValueError, ShardingError):
        with pytest.raises(caught, match=r"Total batch size \(6\) is not a multiple of batch_size \(4\)"):
            batch.shard_by_batch_size(2, batch_size=4)  # NeMo RL's words: its users' tests match on them
    with pytest.raises(AssertionError, match=r"Batch size \(6\) is not a multiple of shards \(4\)"):
        batch.shard_by_batch_size(4)
    with pytest.raises(AssertionError, match=r"found sizes: \[2,3\]"):
        BatchedDataDict({"x": [1, 2], "y": [1, 2, 3]}).shard_by_batch_size(1)


# ---- sharded dispatch and dp helpers -------------------------------------------------------
@pytest.fixture(scope="module")
def dp_tp_group(many_gpu_ray):
    cluster = RayVirtualCluster([4], use_gpus=False)
    sharding = NamedSharding([[0, 1], [2, 3]], ["data_parallel", "tensor_parallel"])
    group = RayWorkerGroup(
        cluster,
        ShardWorker,
        bundle_indices_list=[(0, [0, 1]), (0, [2, 3])],
        sharding_annotations=sharding,
        name_prefix="dptp",
    )
    yield group
    group.shutdown()
    cluster.shutdown()


def test_rank_0_only_axes_and_keyword_lists_the_2026_way(dp_tp_group) -> None:
    """run_rank_0_only_axes calls only index 0 of those axes; run_all_workers_multiple_data
    takes a list per keyword (an entry per called worker), with NeMo RL's assertion texts."""
    refs = dp_tp_group.run_all_workers_single_data("work", run_rank_0_only_axes=["tensor_parallel"], extra=5)
    assert [r[0] for r in ray.get(refs)] == [0, 2]  # the tensor-parallel leaders
    assert len(ray.get(dp_tp_group.run_all_workers_single_data("work", run_rank_0_only_axes=["nope"]))) == 4
    everyone = dp_tp_group.run_all_workers_multiple_data(
        "work", data=None, extra=[1, 2, 3, 4], common_kwargs={"scale": 10}
    )
    assert [r[2] for r in ray.get(everyone)] == [10, 20, 30, 40]
    leaders = dp_tp_group.run_all_workers_multiple_data("work", extra=[7, 8], run_rank_0_only_axes=["tensor_parallel"])
    assert [(r[0], r[2]) for r in dp_tp_group.get_all_worker_results(leaders)] == [(0, 7), (2, 8)]
    with pytest.raises(AssertionError, match="data length = 3, number of workers = 4"):
        dp_tp_group.run_all_workers_multiple_data("work", extra=[1, 2, 3])
    with pytest.raises(AssertionError, match="number of workers started = 2"):
        dp_tp_group.run_all_workers_multiple_data("work", extra=[1, 2, 3], run_rank_0_only_axes=["tensor_parallel"])
    with pytest.raises(AssertionError, match="All kwargs must have the same length"):
        dp_tp_group.run_all_workers_multiple_data("work", extra=[1, 2, 3, 4], data_x=[1])
    with pytest.raises(AssertionError, match="please use run_all_workers_single_data"):
        dp_tp_group.run_all_workers_multiple_data("work")
    with pytest.raises(ValueError, match="not both"):
        dp_tp_group.run_all_workers_multiple_data("work", [1, 2, 3, 4], extra=[1, 2, 3, 4])


def test_dp_helpers(dp_tp_group) -> None:
    assert dp_tp_group.dp_size == 2
    assert [dp_tp_group.get_dp_leader_worker_idx(i) for i in range(2)] == [0, 2]
    with pytest.raises(IndexError):
        dp_tp_group.get_dp_leader_worker_idx(2)
    assert ray.get(dp_tp_group.run_single_worker_single_data("work", 3, data="d"))[:2] == (3, "d")
    with pytest.raises(IndexError, match="out of range"):
        dp_tp_group.run_single_worker_single_data("work", 4)


def test_sharded_on_dp_replicated_on_tp(dp_tp_group) -> None:
    batch = BatchedDataDict({"x": [10, 11, 12, 13]})
    fut = dp_tp_group.run_all_workers_sharded_data(
        "work",
        data=batch,
        in_sharded_axes=["data_parallel"],
        replicate_on_axes=["tensor_parallel"],
        output_is_replicated=["tensor_parallel"],
        common_kwargs={"extra": 7, "scale": 2},
    )
    assert fut.called_workers == [0, 1, 2, 3] and fut.return_from_workers == [0, 2]
    assert dp_tp_group.get_all_worker_results(fut) == [(0, [10, 11], 14), (2, [12, 13], 14)]
    # pre-split lists work too; the free tensor_parallel axis: only index 0 is called ...
    fut = dp_tp_group.run_all_workers_sharded_data("work", data=["a", "b"], in_sharded_axes=["data_parallel"])
    assert fut.called_workers == [0, 2] and dp_tp_group.get_all_worker_results(fut) == [(0, "a", None), (2, "b", None)]
    # ... unless dummy calls are asked for (None for the data)
    fut = dp_tp_group.run_all_workers_sharded_data(
        "work", data=["a", "b"], in_sharded_axes=["data_parallel"], make_dummy_calls_to_free_axes=True
    )
    assert ray.get(fut.futures) == [(0, "a", None), (1, None, None), (2, "b", None), (3, None, None)]


def test_bad_sharded_input_fails_before_anything_is_scheduled(dp_tp_group) -> None:
    before = ray.get(dp_tp_group.run_all_workers_single_data("call_count"))
    cases = [
        (dict(data=["a", "b", "c"], in_sharded_axes=["data_parallel"]), "3 items for axis 'data_parallel' of size 2"),
        (
            dict(data=BatchedDataDict({"x": [1, 2, 3]}), in_sharded_axes=["data_parallel"]),
            "3 rows, which do not divide",
        ),
        (dict(data=["a", "b"], in_sharded_axes=["dp"]), "unknown axis 'dp'"),
        (
            dict(data=["a", "b"], in_sharded_axes=["data_parallel"], replicate_on_axes=["data_parallel"]),
            "both sharded and replicated",
        ),
        (dict(data=7, in_sharded_axes=["data_parallel"]), "must be a list"),
    ]
    for kwargs, msg in cases:
        with pytest.raises((ValueError, TypeError), match=msg):
            dp_tp_group.run_all_workers_sharded_data("work", **kwargs)
    assert ray.get(dp_tp_group.run_all_workers_single_data("call_count")) == before


def test_layout_that_does_not_match_the_group_is_refused_before_workers_start(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([2], use_gpus=False)
    try:
        with pytest.raises(ValueError, match="the group has 2 workers"):
            RayWorkerGroup(
                cluster,
                ShardWorker,
                name_prefix="badlayout",
                sharding_annotations=NamedSharding([[0, 1], [2, 3]], ["data_parallel", "tensor_parallel"]),
            )
        assert _gone("badlayout-0-0")
    finally:
        cluster.shutdown()


# ---- workers that fail to build -------------------------------------------------------------
@pytest.mark.parametrize(
    ("worker", "needle"),
    [
        (f"{W}.NoSuchWorker", "cannot import worker class"),
        (f"{W}.BrokenInit", "checkpoint /nope/model.pt not found"),
        (f"{W}.BadConfigure", "tensor_parallel_size 3 does not divide"),
    ],
)
def test_a_worker_that_fails_to_build_names_index_node_and_traceback(many_gpu_ray, worker: str, needle: str) -> None:
    cluster = RayVirtualCluster([2], use_gpus=False)
    try:
        with pytest.raises(WorkerBuildError) as err:
            RayWorkerGroup(cluster, worker, name_prefix="broken")
        msg = str(err.value)
        headline = msg.splitlines()[0]  # leads with the cause, then the worker's own traceback, once
        assert headline.startswith("worker 0 (broken-0-0) on node ") and needle in headline, msg
        root = headline.split("failed to build: ", 1)[1]
        assert 'File "' in msg and msg.count(root) == 1, msg
        assert _gone("broken-0-0") and _gone("broken-0-1")  # nothing left behind
    finally:
        assert cluster.shutdown() is True
