"""A small tmpfs of the test's own: a disk that fills up for real (mounting needs root, as in CI)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mount_tmpfs(directory: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` (``"20m"``) on ``directory``; why it could not be, or None."""
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else done.stderr.strip() or f"mount exited {done.returncode}"


def unmount(directory: Path) -> None:
    """Unmount ``directory``, lazily if something still holds it open."""
    if subprocess.run(["umount", str(directory)], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


__all__ = ["mount_tmpfs", "unmount"]
