"""Runs on the login node (or a workstation): the CLI, render, submit, job lookup, teardown, local runs, the Python submit API."""
