"""Data types of NeMo RL's ``nemo_rl.data`` that the distributed layer carries (``PackedTensor``)."""
