"""Which memory allocator the training and serving processes run on: TCMalloc where it is installed.

Every CPU batch has another padded length, so each step frees and allocates tensors of new sizes. Under
glibc's allocator a PyTorch process slows as it runs: the demo's warm-up went from 5.5 to 7.3 s a step over
48 steps, and its GRPO stage's pool refreshes from 23 to 38 s. The same 48 warm-up steps with TCMalloc
preloaded took 4.55 s on average against 6.40 (1.41x), did not slow down (drift 1.04x against 1.34x) and
held 6.0 GB against 9.3 (`benchmarks/sft_drift.py`, 2-core Xeon, bf16, docs/measurements/2026-12-07-allocator.md).
vLLM's CPU guide recommends the same library for its engine.

An allocator must be in place before a process starts, so this module only builds the environment the
launchers (the demo, `proofcheck train`) give their children; it imports nothing heavy.

- `PROOFCHECK_ALLOCATOR` unset or `tcmalloc`: TCMalloc when Debian's `libtcmalloc-minimal4` (or the same
  library elsewhere) is installed; unset and absent, glibc's with a note saying what to install; set to
  `tcmalloc` and absent, an error.
- `glibc`: the environment as it is (no preload).
- a path to a shared library: that library preloaded (for example jemalloc).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "PROOFCHECK_ALLOCATOR"
TCMALLOC_NAME = "libtcmalloc_minimal.so.4"
# where distributions put it (Debian/Ubuntu multiarch, Fedora/RHEL)
TCMALLOC_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                 "/usr/local/lib")
INSTALL_HINT = "apt-get install libtcmalloc-minimal4"
# TCMalloc reports every allocation over 1 GiB on stderr; the warm-up's logits buffers cross it legitimately
QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}


@dataclass(frozen=True)
class AllocatorChoice:
    """The allocator the children get: its name, the library preloaded (None: glibc's), and why."""

    name: str
    library: str | None
    reason: str

    def env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The variables to add to a child's environment: the library in front of any `LD_PRELOAD` already set."""
        if self.library is None:
            return {}
        current = (os.environ if environ is None else environ).get("LD_PRELOAD", "")
        if self.library in current.split(":"):
            return dict(QUIET)
        return {"LD_PRELOAD": ":".join(p for p in (self.library, current) if p), **QUIET}

    def record(self) -> dict[str, str | None]:
        return {"allocator": self.name, "library": self.library, "reason": self.reason}


def find_tcmalloc(dirs: tuple[str, ...] = TCMALLOC_DIRS) -> str | None:
    """The first TCMalloc library found in `dirs`, else None."""
    return next((str(Path(d) / TCMALLOC_NAME) for d in dirs if (Path(d) / TCMALLOC_NAME).is_file()), None)


def choose_allocator(setting: str | None = None, dirs: tuple[str, ...] = TCMALLOC_DIRS) -> AllocatorChoice:
    """The allocator for `setting` (default: the `PROOFCHECK_ALLOCATOR` environment variable); see the module.

    Raises ValueError for a setting that names something absent, with what to do instead."""
    raw = os.environ.get(ENV_VAR, "") if setting is None else setting
    value = raw.strip()
    if value == "glibc":
        return AllocatorChoice("glibc", None, f"{ENV_VAR}=glibc")
    if value in ("", "tcmalloc"):
        found = find_tcmalloc(dirs)
        if found is not None:
            return AllocatorChoice("tcmalloc", found, "installed: steps ~1.4x faster, no slowdown as a run goes on")
        if value == "tcmalloc":
            raise ValueError(f"{ENV_VAR}=tcmalloc but {TCMALLOC_NAME} is in none of {', '.join(dirs)}: "
                             f"`{INSTALL_HINT}`, or set {ENV_VAR}=glibc")
        return AllocatorChoice("glibc", None, f"TCMalloc not installed (`{INSTALL_HINT}` makes the training steps "
                                              "~1.4x faster and stops them slowing as a run goes on)")
    if Path(value).is_file():
        return AllocatorChoice(Path(value).name, value, f"{ENV_VAR}={value}")
    raise ValueError(f"{ENV_VAR}={raw!r}: use tcmalloc, glibc or the path of an allocator library (no file "
                     f"{value!r})")


def loaded_allocator(maps: str | Path = "/proc/self/maps") -> str | None:
    """The allocator this process runs on, read from its memory map: `tcmalloc`, `jemalloc` or `glibc` (None where
    the map cannot be read, off Linux). A stage records it, so a run says what it ran on, not what was asked."""
    try:
        text = Path(maps).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((name for name in ("tcmalloc", "jemalloc") if f"lib{name}" in text), "glibc")
