"""The fetch-session scaling plot shared by the process-level and in-process benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_session_scaling(
    runs: list[dict[str, Any]],
    path: Path,
    *,
    cpu_key: str,
    cpu_title: str,
    cpu_unit: str,
    suptitle: str,
    extra_cpu_key: str | None = None,
) -> Path | None:
    """Two log-log panels against N: CPU per fetch and request+response bytes per fetch, one line
    per mode (full sessionless, incremental 1 %, incremental with a fixed number changed).

    ``extra_cpu_key`` adds a dashed companion line (e.g. CPU without GC time) for the modes whose
    runs are long enough to meet a collection.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[bench]')")
        return None
    ns = [run["n"] for run in runs]
    labels = {
        "sessionless_full": "full (sessionless, all N listed)",
        "incremental": "incremental, 1% changed",
        "incremental_fixed": f"incremental, {runs[0]['incremental_fixed']['changed_per_round']} changed",
    }
    fig, (cpu_ax, bytes_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    for mode, label in labels.items():
        line = cpu_ax.plot(ns, [run[mode][cpu_key] for run in runs], marker="o", label=label)[0]
        if extra_cpu_key is not None and mode != "incremental_fixed":
            cpu_ax.plot(
                ns,
                [run[mode][extra_cpu_key] for run in runs],
                linestyle="--",
                color=line.get_color(),
                alpha=0.6,
                label=f"{label.split(',')[0]}, without GC time",
            )
        bytes_ax.plot(ns, [run[mode]["bytes_mean"] for run in runs], marker="o", label=label)
    for ax, title, unit in (
        (cpu_ax, cpu_title, cpu_unit),
        (bytes_ax, "request + response bytes per fetch", "bytes"),
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("partitions in the fetch session (N)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(suptitle)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
