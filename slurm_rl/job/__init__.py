"""Runs inside the allocation, on every node: the bootstrap (lifecycle, head and worker roles),
ray start, finalize, cleanup. Code that runs in the driver is in ../driver/."""
