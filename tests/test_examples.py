"""The Examples sections of the ways into the API run as written, from the repository root."""

import doctest
from pathlib import Path

import pytest

import gpudvfs
import gpudvfs.online

REPO = Path(__file__).resolve().parent.parent
WAYS_IN = [gpudvfs.PowerModel, gpudvfs.TimeModel, gpudvfs.online, gpudvfs.predict_profile]


@pytest.mark.parametrize("obj", WAYS_IN, ids=lambda o: o.__name__)
def test_examples_run(obj, monkeypatch):
    monkeypatch.chdir(REPO)  # the examples read validation/ as a user at the repository root would
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, obj.__name__) if t.examples]
    assert tests, f"{obj.__name__} has no Examples section"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {obj.__name__} failed"
