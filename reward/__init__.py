"""Meta-verifier grading and the GRPO reward functions (no torch at module level)."""
