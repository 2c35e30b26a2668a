"""The reward ablation: one entry, `python benchmarks/ablate` (`__main__.py`, the command line in `driver.py`).
Its parts: `config.py` (sizes, arms, the recipe and its deltas), `arms.py` (the GRPO runs, their fitting and the
SFT control), `repair.py` (the repaired positives), `kpass.py` (the k-pass curve), `report.py` (statistics,
ABLATIONS.md and its plots).
"""
