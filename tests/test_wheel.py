"""The wheel carries the shipped datasets: installed outside the checkout, rag-bench runs its
defaults from an empty folder."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, require

pytestmark = pytest.mark.slow

DATA = ROOT / "data"


def run(command: list, **options) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **options)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built without network (setuptools comes with the dev extra)."""
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, ROOT])
    [built] = out.glob("rag_bench-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A new venv holding the wheel; its dependencies come from this environment's
    site-packages through a .pth line (no download), which never holds rag_bench itself."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    ours = sysconfig.get_path("purelib")
    Path(purelib.stdout.strip(), "dependencies.pth").write_text(ours + "\n")
    assert not any(Path(p, "rag_bench").exists() for p in [ours, *site.getsitepackages()])
    pip = [sys.executable, "-m", "pip", "--python", python]
    # without PYTHONPATH: a checkout on it (and the egg-info the build leaves there) would look
    # like an installed rag-bench of the same version, and pip would install nothing
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run([*pip, "install", "--no-deps", "--no-index", "-q", wheel], env=alone)
    return venv


def test_the_wheel_holds_every_shipped_file(wheel):
    """Every file of the shipped datasets in data/ is in the wheel under rag_bench/data/shipped/,
    and nothing else of data/ (a user's own dataset there stays out)."""
    from rag_bench.data.dataset import SHIPPED

    packed = set(zipfile.ZipFile(wheel).namelist())
    folders = [DATA / name for name in (*SHIPPED, "example")]
    files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert files and any(p.parent.name == "qrels" for p in files)
    inside = {"rag_bench/data/shipped/" + p.relative_to(DATA).as_posix() for p in files}
    assert not inside - packed, sorted(inside - packed)
    others = {n for n in packed if n.startswith("rag_bench/data/shipped/")} - inside
    assert others == {"rag_bench/data/shipped/README.md"}


def test_the_wheel_lists_every_package():
    """pyproject.toml lists the packages (data/ is mapped into one): none is left out."""
    tomllib = require("tomllib", "Python 3.11 or newer")
    from setuptools import find_packages

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = find_packages(ROOT, include=["rag_bench*"])
    assert sorted(listed["packages"]) == sorted([*found, "rag_bench.data.shipped"])


def test_the_installed_wheel_runs_the_defaults_from_an_empty_folder(installed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BENCH_", "PYTHON"))}
    env["RAG_BENCH_CACHE_DIR"] = str(tmp_path / "cache")
    options = {"cwd": empty, "env": env}
    python, rag_bench = installed / "bin" / "python", installed / "bin" / "rag-bench"

    where = run([python, "-c", "import rag_bench; print(rag_bench.__file__)"], **options)
    assert Path(where.stdout.strip()).is_relative_to(installed)
    runs = tmp_path / "runs"
    command = [rag_bench, "run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", runs]
    run([*command, "--format", "json"], **options)
    shown = run([rag_bench, "show", "latest", "--runs-dir", runs, "--format", "json"], **options)
    manifest = json.loads(shown.stdout)["manifest"]
    assert Path(manifest["dataset"]["path"]).is_relative_to(installed)
    assert manifest["dataset"]["name"] == "kestrel-kb"
    agreement = run([rag_bench, "judge-agreement", "--format", "json"], **options)
    assert json.loads(agreement.stdout)
    assert sorted(p.name for p in empty.iterdir()) == []
