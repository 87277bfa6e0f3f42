"""Runs on the login node (or a workstation): the CLI, render, submit, job lookup and the
per-user job index, status, plots, teardown, local runs, the Python submit API."""
