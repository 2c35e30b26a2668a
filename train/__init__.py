"""GRPO training of the verifier with TRL (`accelerate launch train/grpo.py`)."""
