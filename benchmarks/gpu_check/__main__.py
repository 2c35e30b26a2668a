"""The GPU check's one entry (docs/gpu-check.md):

    python benchmarks/gpu_check [--device cpu] [--out DIR] ...   the check (driver.py)
    python benchmarks/gpu_check stage NAME --work DIR             one stage (the driver runs these)
    python3 benchmarks/gpu_check wheels [--dest .gpu-wheels]      `make gpu-wheels` (wheels.py)
    python3 benchmarks/gpu_check site DIR                          the checkout's packages linked into DIR (site_links.py)

`wheels` and `site` need only the standard library: they run before anything of the project is importable.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # benchmarks/: this package and the shared helpers


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv and argv[0] in ("stage", "wheels", "site") else ("check", argv)
    if command == "stage":
        from gpu_check.stages import main as run
    elif command == "wheels":
        from gpu_check.wheels import main as run
    elif command == "site":
        from gpu_check.site_links import main as run
    else:
        from gpu_check.driver import main as run
    return run(rest)


sys.exit(main(sys.argv[1:]))
