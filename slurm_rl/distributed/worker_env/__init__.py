"""What a worker process runs with, set up on the nodes: environment hygiene (the setup hook
that strips launcher variables, runs in every worker), uv environments (built by a task on each
node), GPU pinning, torch.distributed collectives (in the workers) and the node probe (a task
on each node that reports pids, memory and stacks)."""
