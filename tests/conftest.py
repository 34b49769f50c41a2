"""Shared fixtures. Real-data tests find ../shared/data through GPUDVFS_DATA (default: the
`shared/data` folder beside the repository) and skip with the reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# pytest-xdist gives each worker the controller's terminal width as COLUMNS (80 without a
# terminal): the command line would wrap its tables there, where a run in one process prints
# them whole (gpudvfs.cli.output.PIPE_WIDTH). Before any test imports the command line.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.pop("COLUMNS", None)

try:  # the train environment of CI installs hypothesis too; a bare one may not
    from hypothesis import settings
except ImportError:
    pass
else:
    # Speed is measured by benches/, against a baseline: a per-example deadline on a shared,
    # loaded machine (or beside another xdist worker) only fails tests at random.
    settings.register_profile("gpudvfs", deadline=None)
    settings.load_profile("gpudvfs")


def data_dir() -> Path:
    return Path(os.environ.get("GPUDVFS_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def data() -> Path:
    d = data_dir()
    if not d.is_dir():
        pytest.skip(f"real measurement data not found at {d} (set GPUDVFS_DATA)")
    return d


@pytest.fixture(scope="session")
def registry3(tmp_path_factory):
    """A fleet registry of simulated GPUs 0-2, calibrated in this process (no Ray)."""
    from gpudvfs.fleet.calibrate import SimFleet, calibrate_gpu
    from gpudvfs.fleet.registry import Registry

    root = tmp_path_factory.mktemp("registry3")
    for slot in range(3):
        calibrate_gpu(SimFleet(), slot, str(root), 1.0, "per-domain")
    return Registry.load(root)
