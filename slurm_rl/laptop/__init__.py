"""slurm-rl from a laptop: every command runs on the cluster's login node through the system
ssh (one ControlMaster connection per login), with code copied over and results copied back."""
