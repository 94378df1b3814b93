"""PNG plots of a results file: one horizontal bar chart per figure a benchmark emitted.

Each bar is a median; its whisker spans the spread the benchmark measured (the interquartile
range over rounds, or min – max when there are fewer than four rounds); a dashed line marks the
physical limit when the benchmark states one. Needs matplotlib (in the `bench` extra); without
it the harness skips the plots and says so.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any


def plot_all(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write one PNG per figure in `results` into `out_dir`; the paths written."""
    import matplotlib

    matplotlib.use("Agg")  # no display on CI machines
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for bench in results["benchmarks"].values():
        for spec in bench.get("figures", []):
            bars = spec["bars"]
            if not bars:
                continue
            labels = [b["label"] for b in bars]
            medians = [b["median"] for b in bars]
            errors = [
                [max(b["median"] - b["low"], 0.0) for b in bars],
                [max(b["high"] - b["median"], 0.0) for b in bars],
            ]
            fig, ax = plt.subplots(figsize=(8, 0.55 * len(bars) + 1.4))
            positions = range(len(bars))
            ax.barh(positions, medians, xerr=errors, color="#4878a8", capsize=4)
            ax.set_yticks(list(positions), labels)
            ax.invert_yaxis()  # first contender on top, as in the tables
            if spec.get("ideal") is not None:
                ax.axvline(
                    spec["ideal"], color="#c44e52", linestyle="--", label=spec["ideal_label"]
                )
                ax.legend(loc="best", fontsize=8, framealpha=0.9)
            ax.set_xlabel(spec["unit"])
            # Wrapped: a long title (model, prompts, interval) would run off the figure.
            ax.set_title("\n".join(textwrap.wrap(spec["title"], 70)), fontsize=10)
            ax.grid(axis="x", alpha=0.3)
            fig.tight_layout()
            path = out_dir / f"{spec['name']}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written
