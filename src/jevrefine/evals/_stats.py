"""A report's statistics: Newcombe's paired interval, McNemar's test, Cohen's kappa, percentiles.

Pure functions of counts and lists, so the tests can hold them against hand-worked numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["cohen_kappa", "mcnemar_exact_p", "newcombe_paired_ci", "percentile", "wilson"]

Z95 = 1.959963984540054
"""The two-sided 95 % point of the standard normal."""


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (`(0, 1)` when `n` is 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return (max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale))


def newcombe_paired_ci(
    both: int, only_before: int, only_after: int, neither: int, z: float = Z95
) -> tuple[float, float]:
    """The 95 % interval of (after rate − before rate) over the same cases: Newcombe's method 10.

    Newcombe (1998), "Improved confidence intervals for the difference between binomial
    proportions based on paired data", Statistics in Medicine 17:2635-2650, method 10: the
    Wilson intervals of both rates, combined with the correlation of the pairs (with Newcombe's
    n/2 correction of a positive correlation, as in Altman et al., "Statistics with
    Confidence"). It behaves well for small samples and rates near 0 or 1, where the Wald
    interval fails; and it always holds the point estimate (clamped, against rounding).

    Args:
        both: cases passing before and after.
        only_before: cases passing before only (degraded).
        only_after: cases passing after only (improved).
        neither: cases failing both times.
        z: the normal quantile of the confidence level (1.96 for 95 %).
    """
    n = both + only_before + only_after + neither
    if n == 0:
        return (0.0, 0.0)
    after = (both + only_after) / n
    before = (both + only_before) / n
    diff = after - before
    l1, u1 = wilson(both + only_after, n, z)
    l2, u2 = wilson(both + only_before, n, z)
    before_yes, before_no = both + only_before, only_after + neither
    after_yes, after_no = both + only_after, only_before + neither
    margins = before_yes * before_no * after_yes * after_no
    phi = 0.0
    if margins > 0:
        # Newcombe's correction: a positive cross-product is reduced by n/2 (and floored at 0),
        # so a few concordant pairs do not make the interval collapse to a point.
        cross = both * neither - only_before * only_after
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    down = math.sqrt(
        max(0.0, (after - l1) ** 2 - 2 * phi * (after - l1) * (u2 - before) + (u2 - before) ** 2)
    )
    up = math.sqrt(
        max(0.0, (u1 - after) ** 2 - 2 * phi * (u1 - after) * (before - l2) + (before - l2) ** 2)
    )
    return (max(-1.0, min(diff, diff - down)), min(1.0, max(diff, diff + up)))


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of two raters on a 2 × 2 table; `None` when undefined (chance agreement 1).

    `tp`: both say passed; `fp`: the first (the loop judge) passed, the second (the oracle)
    failed; `fn`: the reverse; `tn`: both failed.
    """
    n = tp + fp + fn + tn
    if n == 0:
        return None
    observed = (tp + tn) / n
    first_yes, second_yes = (tp + fp) / n, (tp + fn) / n
    chance = first_yes * second_yes + (1 - first_yes) * (1 - second_yes)
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0 to 100) by linear interpolation between closest ranks.

    The same as `statistics.quantiles(..., method="inclusive")` and NumPy's default; 0.0 for no
    values.
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mcnemar_exact_p(only_first: int, only_second: int) -> float:
    """The two-sided exact McNemar p-value of paired pass/fail outcomes.

    Only the discordant pairs speak to a difference: `only_first` cases passed under the first
    setup alone, `only_second` under the second alone. With no difference, each discordant case
    is a fair coin, so the p-value is twice the binomial(n, 1/2) tail at the smaller count
    (capped at 1; 1.0 when there is no discordant case). The tail is summed in log space
    (`math.lgamma`), so a million cases cost a million additions, not giant integers.
    """
    n = only_first + only_second
    if n == 0:
        return 1.0
    smaller = min(only_first, only_second)
    log_half_n = n * math.log(2.0)
    log_n = math.lgamma(n + 1)
    tail = math.fsum(
        math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) - log_half_n)
        for k in range(smaller + 1)
    )
    return min(1.0, 2.0 * tail)
