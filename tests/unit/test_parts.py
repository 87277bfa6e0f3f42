"""A job of parts (--parts, core/parts.py): the file's checks, one line each; the order of the
heterogeneous components and the ranks; the rendered script (golden); what the flags beside it
may not say; the GPU shares of a service's instances; the balancer's choice of instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.config.spec import load_spec_file
from slurm_rl.core.errors import UsageError
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.parts import component_offsets, component_parts, load_parts, place, shared_ray_node
from slurm_rl.core.service_states import expected_instances, summary
from slurm_rl.job.balancer import Pool
from slurm_rl.job.service_instances import gpu_shares
from slurm_rl.login.reading.job_tables import parts_lines
from slurm_rl.login.submission.parts_preflight import check_part_images
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job, render_sbatch
from slurm_rl.login.submission.resolve import changed, resolve_options

REPO = Path(__file__).resolve().parent.parent.parent
GOLDEN = REPO / "tests" / "golden" / "parts-pyxis.sbatch"
SHAPE = """
trainer: {nodes: 2, gpus_per_node: 8}
rollout: {nodes: 1, gpus_per_node: 8, exclusive: true}
judge:   {nodes: 1, partition: cpu, service: "python3 judge.py --port {port}", replicas_per_node: 2,
          ready: "http:/health", restarts: 2}
sandbox: {sidecar_of: rollout, service: "python3 sandbox.py --port {port}", ready: tcp}
"""
JUDGE_IMAGE = SHAPE.replace("restarts: 2}", "restarts: 2, image: /scratch/images/judge.sif}")


def parts_file(tmp_path: Path, text: str = SHAPE, name: str = "parts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as info:
        load_parts(parts_file(tmp_path, text))
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("t: {nodes: 1, replica: 2}", "part 't': unknown key 'replica' (keys: nodes,"),
        ("t: {nodes: 0}", "part 't': nodes: give a node count >= 1"),
        ("t: {gpus_per_node: 2}", "part 't': nodes: give a node count >= 1"),
        ("t: {nodes: 1}\ns: {sidecar_of: u, service: 'x {port}'}", "part 's': sidecar_of 'u': no such part"),
        ("t: {nodes: 1, ready: ping}", "part 't': ready 'ping': use \"tcp\" or \"http:/PATH\""),
        ("t: {nodes: 1, mem: lots}", "part 't': mem 'lots': use a SLURM memory size per node"),
        ("t: {nodes: 1}\nj: {nodes: 1, service: serve}", "part 'j': service 'serve': put {port} where"),
        ("t: {nodes: 1, restarts: 2}", "part 't': restarts: a Ray part runs no service"),
        ("j: {nodes: 1, service: 'a {port}'}", "no Ray part (one without service)"),
        (
            "t: {nodes: 1}\nj: {nodes: 1, service: 'a {port}', gpus_per_node: 3, replicas_per_node: 2}",
            "gpus_per_node 3 does not split evenly over replicas_per_node 2",
        ),
        ("t: {nodes: 1}\ns: {sidecar_of: t, service: 'a {port}', nodes: 2}", "a sidecar runs on its host part's nodes"),
        ("Trainer: {nodes: 1}", "part 'Trainer': a part's name is lower-case letters"),
        ("[1, 2]", "a mapping of part names to parts"),
        ("t: {nodes: 1", "not valid YAML"),
    ],
)
def test_a_bad_parts_file_is_one_line_naming_the_part_and_the_fix(tmp_path: Path, text: str, said: str) -> None:
    line = refusal(tmp_path, text)
    assert said in line and "\n" not in line, line
    assert line.startswith(("parts file ", "--parts ")), line


def test_components_put_the_ray_parts_first_and_ranks_count_ray_nodes_first(tmp_path: Path) -> None:
    text = "judge: {nodes: 2, service: 'j {port}'}\ntrainer: {nodes: 2}\nrollout: {nodes: 1}\n"
    parts = load_parts(parts_file(tmp_path, text + "box: {sidecar_of: rollout, service: 'b {port}'}"))
    assert component_parts(parts) == ["trainer", "rollout", "judge"]
    assert component_offsets(parts) == {"trainer": 0, "rollout": 2, "judge": 3}
    groups = [["n1", "n2"], ["n3"], ["n4", "n1"]]
    # a task's rank in the step (SLURM_PROCID) tells its component: trainer 0-1, rollout 2, judge 3-4
    assert [place(parts, rank, groups)[0] for rank in range(5)] == ["trainer"] * 2 + ["rollout"] + ["judge"] * 2
    assert place(parts, 4, groups)[1] == ["n1", "n2", "n3"]  # the Ray nodes in rank order
    one = load_parts(parts_file(tmp_path, "trainer: {nodes: 3}", "one.yaml"))  # one part: a plain job
    assert place(one, 2, [["n1", "n2", "n3"]]) == ("trainer", ["n1", "n2", "n3"])
    assert expected_instances(parts) == {"judge": 2, "box": 1}
    assert shared_ray_node(parts, groups) is None
    line = shared_ray_node(parts, [["n1", "n2"], ["n2"], ["n4", "n5"]])
    assert line is not None and "trainer and rollout were both placed on n2" in line and "exclusive: true" in line


def _opts(tmp_path: Path, spec, text: str = SHAPE, **flags):  # type: ignore[no-untyped-def]
    exp = tmp_path / "experiment.py"
    exp.write_text("")
    return resolve_options(
        spec, str(exp), experiment_args=("{judge.url}",), user="alice", name="rl", python="/shared/venv/bin/python",
        time="1:00:00", parts_file=str(parts_file(tmp_path, text)), **flags,
    )  # fmt: skip


def test_the_job_is_one_heterogeneous_job_with_a_component_per_part(tmp_path: Path, update_goldens: bool) -> None:
    spec = load_spec_file(REPO / "cluster_specs" / "example-pyxis.json")
    opts = _opts(tmp_path, spec)
    assert opts.nodes == 3 and opts.total_nodes == 3  # the Ray nodes: trainer's and rollout's
    assert opts.parts["trainer"].partition == spec.partition and opts.parts["judge"].partition == "cpu"
    text = render_sbatch(plan_job(spec, opts.replace(experiment="/home/alice/rl/experiment.py", workdir="")))
    if update_goldens:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    head, *rest = text.split("#SBATCH hetjob")
    assert len(rest) == 2 and "--job-name=rl" in head and "--job-name" not in "".join(rest)
    assert "#SBATCH --nodes=2" in head and "--gpus-per-node=8" in head
    assert "--exclusive" in rest[0] and "--partition=cpu" in rest[1] and "--gpus-per-node" not in rest[1]
    step = text[text.rindex("srun --nodes=2", 0, text.index("srun_pid=$!")) : text.index("srun_pid=$!")]
    assert step.count("\n  : --nodes=") == 2  # three components: the sidecar rides on rollout's
    # Pyxis' flags are SPANK options, which hold for the whole srun: given once (a --container-name
    # given in each component was refused by Pyxis on the lab: "specified multiple times")
    first = step[: step.index("\n  : --nodes=")]
    assert step.count("--container-image=") == 1 and "--container-image=" in first, step
    assert "--container" not in step[len(first) :] and "slurm_rl_image_flags" not in step[len(first) :], step


@pytest.mark.parametrize("spec_file", ["example-apptainer.json", "example-pyxis.json"])
def test_a_part_with_an_image_of_its_own_runs_its_supervisor_in_that_image_in_a_step_of_its_own(
    tmp_path: Path, spec_file: str
) -> None:
    spec = load_spec_file(REPO / "cluster_specs" / spec_file)
    text = JUDGE_IMAGE.replace("ready: tcp}", "ready: tcp, image: /scratch/images/box.sif}")
    opts = _opts(tmp_path, spec, text)
    text = render_sbatch(plan_job(spec, opts.replace(experiment="/home/alice/rl/experiment.py", workdir="")))
    main = text[text.rindex("srun --nodes=2", 0, text.index("srun_pid=$!")) : text.index("srun_pid=$!")]
    assert "judge.sif" not in main and "box.sif" not in main  # every part's task: the job's image
    steps = text[text.index("srun_pid=$!") : text.rindex("slurm_rl_finalize")].split("srun --overlap")[1:]
    judge, box = sorted(steps, key=lambda s: "box.sif" in s)
    # the judge's supervisor on the judge's component (2 per node), the sandbox's on rollout's
    assert judge.startswith(" --het-group=2 --nodes=1 ") and "supervise.sh judge 2 &" in judge, judge
    assert box.startswith(" --het-group=1 --nodes=1 ") and "supervise.sh sandbox 1 &" in box, box
    assert "/scratch/images/judge.sif" in judge and "/scratch/images/box.sif" in box
    assert text.rindex('touch "$SLURM_RL_JOB_DIR"/services/stop') > text.rindex("srun --overlap")  # at the end


@pytest.mark.parametrize(
    ("spec_file", "text", "said"),
    [
        ("lab.json", JUDGE_IMAGE, "the spec's container_runtime is 'none' (no containers)"),
        ("example-apptainer.json", SHAPE.replace("exclusive: true}", "exclusive: true, image: x.sif}"),
         "a Ray part runs in the job's image"),
        ("example-apptainer.json", SHAPE.replace("ready: tcp}", "ready: tcp, image: /no/such.sif}"),
         "does not exist here; give the path of an image file the nodes share"),
    ],
)  # fmt: skip
def test_an_image_a_part_cannot_have_is_refused_naming_the_part_and_the_fix(
    tmp_path: Path, spec_file: str, text: str, said: str
) -> None:
    spec = load_spec_file(REPO / "cluster_specs" / spec_file)
    with pytest.raises(UsageError, match=r"^--parts \S+: part '\w+': image '[^']+': ") as info:
        check_part_images(spec, _opts(tmp_path, spec, text))
    assert said in str(info.value)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("nodes", 2, "--nodes with --parts"),
        ("partition", "gpu", "--partition with --parts"),
        ("gpus_per_node", 4, "--gpus-per-node with --parts"),
        ("head_partition", "cpu", "--head-partition with --parts"),
    ],
)
def test_what_the_parts_file_says_is_refused_as_a_flag_beside_it(tmp_path: Path, flag: str, value, said: str) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec_file(REPO / "cluster_specs" / "example-pyxis.json")
    with pytest.raises(UsageError) as info:
        _opts(tmp_path, spec, **{flag: value})
    assert said in str(info.value) and "drop " in str(info.value)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("heal", 1, "--heal 1: with --parts"),
        ("min_nodes", 1, "--min-nodes 1: with --parts"),
        ("array", "0-3", "job array"),
    ],
)
def test_what_a_job_of_parts_cannot_do_is_refused_naming_why(tmp_path: Path, flag: str, value, said: str) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec_file(REPO / "cluster_specs" / "example-pyxis.json")
    opts = _opts(tmp_path, spec)
    with pytest.raises(UsageError) as info:
        changed(opts, **{flag: value})  # as the flag would come: the line names it
    assert said in str(info.value), str(info.value)


def test_each_instance_gets_its_own_equal_share_of_the_gpus() -> None:
    assert gpu_shares(["0", "1", "2", "3", "4", "5", "6", "7"], 4, 2) == [["0", "1", "2", "3"], ["4", "5", "6", "7"]]
    assert gpu_shares(["3", "5"], 1, 2) == [["3"], ["5"]]
    assert gpu_shares([], 0, 3) == [[], [], []]


def _state(services: Path, node: str, i: int, ready: bool, t: float = 1.0, **more) -> None:  # type: ignore[no-untyped-def]
    path = services / "judge" / f"{node}-{i}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://10.0.0.{i}:{9000 + i}"
    path.write_text(json.dumps({"service": "judge", "node": node, "instance": i, "url": url, "ready": ready,
                                "state": "ready" if ready else "starting", "attempt": 0, "t": t, **more}))  # fmt: skip


def test_the_balancer_spreads_over_ready_instances_and_skips_one_that_refused(tmp_path: Path) -> None:
    services = tmp_path / "services"
    _state(services, "n1", 0, True)
    _state(services, "n1", 1, True)
    _state(services, "n2", 2, False)
    pool = Pool(services, "judge", 0)
    firsts = [pool.order()[0] for _ in range(4)]
    assert set(firsts) == {"http://10.0.0.0:9000", "http://10.0.0.1:9001"} and firsts[0] != firsts[1]
    pool.mark_down("http://10.0.0.0:9000")
    assert pool.order() == ["http://10.0.0.1:9001"]
    _state(services, "n1", 0, True, t=2.0)  # restarted: its state changed, it is back
    pool._next = 0.0
    assert "http://10.0.0.0:9000" in pool.order()


def test_the_services_summary_counts_ready_restarts_and_failures(tmp_path: Path) -> None:
    services = tmp_path / "services"
    _state(services, "n1", 0, True, restarts=1)
    _state(services, "n1", 1, False, restarts=2, state="failed")
    (services / "balancers.json").write_text(json.dumps({"attempt": 0, "urls": {"judge": "http://h:1"}}))
    text = "t: {nodes: 1}\njudge: {nodes: 1, service: 'j {port}', replicas_per_node: 2}"
    parts = load_parts(parts_file(tmp_path, text))
    seen = summary(services, parts)["judge"]
    assert (seen["ready"], seen["total"], seen["restarts"], seen["failed"], seen["url"]) == (1, 2, 3, 1, "http://h:1")
    assert seen["by_node"] == {"n1": ["http://10.0.0.0:9000"]}


def test_the_manifest_keeps_the_files_order_of_parts(tmp_path: Path) -> None:
    """The first Ray part holds the head: a manifest written with sorted keys put "rollout" before
    "trainer", and the nodes took the wrong parts (seen on the lab)."""
    spec = load_spec_file(REPO / "cluster_specs" / "example-pyxis.json")
    opts = _opts(tmp_path, spec)
    manifest = render_job(plan_job(spec, opts)).manifest
    again = JobManifest.model_validate(json.loads(manifest.to_json()))
    assert list(again.parts) == ["trainer", "rollout", "judge", "sandbox"] == list(opts.parts)
    assert component_parts(again.parts) == ["trainer", "rollout", "judge"]


def test_status_says_each_part_on_a_line_of_its_own() -> None:
    parts = {"trainer": {"nodes": ["n2"], "state": "running"}, "judge": {"nodes": ["n1"], "state": "degraded"},
             "box": {"nodes": [], "state": "starting"}}  # fmt: skip
    services = {"judge": {"ready": 1, "total": 2, "restarts": 3, "url": "http://n2:4000"},
                "box": {"ready": 0, "total": 1, "restarts": 0, "url": ""}}  # fmt: skip
    assert parts_lines(parts, services) == [
        "part trainer: running on n2",
        "service judge: degraded, 1/2 ready, 3 restart(s), http://n2:4000, on n1",
        "service box: starting, 0/1 ready, on no node yet",
    ]


def test_a_submission_is_resolved_once_into_a_plan_that_render_reads(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    import slurm_rl.login.submission.plan as plan_module
    from slurm_rl.login.submission.render import render_job

    spec = load_spec_file(REPO / "cluster_specs" / "example-apptainer.json")
    opts = _opts(tmp_path, spec, JUDGE_IMAGE)
    made = []
    real = plan_module.container_for
    monkeypatch.setattr(plan_module, "container_for", lambda s, o: made.append(1) or real(s, o))
    plan = plan_module.plan_job(spec, opts)
    assert plan.container.image == "/scratch/images/rl-gpu.sif" and list(plan.part_containers) == ["judge"]
    judge = plan.part_containers["judge"]
    assert (judge.image, judge.cache_mb, judge.runtime) == ("/scratch/images/judge.sif", 0, "apptainer")
    moved = dataclasses.replace(plan, container=plan.container.model_copy(update={"image": "/elsewhere/rl.sif"}))
    job = render_job(moved)
    assert made == [1]  # the job's container worked out once, by the plan: render read it
    assert "/elsewhere/rl.sif" in job.script and "rl-gpu.sif" not in job.script
    assert job.manifest.container.image == "/elsewhere/rl.sif"
