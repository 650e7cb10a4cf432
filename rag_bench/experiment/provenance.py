"""What produced a run: package versions and the git commit of the working directory."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata

PACKAGES = (
    "rag-bench",
    "numpy",
    "pandas",
    "pyarrow",
    "duckdb",
    "scipy",
    "scikit-learn",
    "bm25s",
    "PyStemmer",
)


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
