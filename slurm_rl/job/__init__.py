"""Runs inside the allocation, on every node: the bootstrap (lifecycle, head and worker roles), ray start, finalize, cleanup, preemption."""
