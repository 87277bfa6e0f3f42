"""The `slurm-rl` commands, a module per family (job_cmds.py: status, list, logs, plot, attach,
teardown; member_cmds.py, result_cmds.py, stack_cmds.py, sweep_cmds.py, image_cmds.py,
chain_cmds.py), each job command made by job_command.py's one mechanism; common.py: error
handling and the submission flags."""
