"""Fitting work into a wall-clock budget: the one rule the demo's planner, the SFT warm-up and GRPO's
time budget use.

`units_that_fit` counts how many whole units of work, each `unit_s` seconds, fit in the seconds left
once a fixed cost is paid (`fixed_s`: what must follow the work, e.g. the final evaluation and save),
added to the units `already` done and kept between `at_least` and `at_most`. Negative time left fits
nothing; a unit of zero seconds is taken as a microsecond (a finite answer, not a division by zero).

Example:
    >>> units_that_fit(100.0, 30.0)                                   # 3 whole units of 30 s in 100 s
    3
    >>> units_that_fit(100.0, 30.0, fixed_s=20.0, already=5, at_most=7)  # 5 done + 2 more, at most 7
    7
    >>> units_that_fit(-5.0, 30.0, at_least=1)                        # nothing fits; at least 1
    1
"""

from __future__ import annotations

MIN_UNIT_S = 1e-6


def units_that_fit(seconds_left: float, unit_s: float, *, fixed_s: float = 0.0, already: int = 0,
                   at_least: int = 0, at_most: int | None = None) -> int:
    """`already` + the whole `unit_s` units that fit in `seconds_left - fixed_s` (none when that is
    negative), capped at `at_most` and then raised to `at_least`."""
    n = already + int(max(0.0, seconds_left - fixed_s) // max(unit_s, MIN_UNIT_S))
    if at_most is not None:
        n = min(at_most, n)
    return max(at_least, n)
