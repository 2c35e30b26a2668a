"""The reward ablation's one entry: `python benchmarks/ablate [--quick] ...` (the options: driver.py)."""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # benchmarks/: this package and the shared helpers

from ablate.driver import main  # noqa: E402

sys.exit(main())
