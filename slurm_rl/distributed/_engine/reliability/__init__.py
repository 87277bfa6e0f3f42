"""What a worker group does when workers die, stall or grow, run from the driver: failure
detection and errors (failures), per-worker call records and memory limits (health, memory
monitor), restarts with a new rendezvous (restarts), load balancing (balancing), status tables."""
