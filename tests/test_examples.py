"""The Examples sections of the ways into the API run as written, from the repository root."""

import doctest
import sys
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


def test_governed_training_example_prints_its_advice(monkeypatch):
    """GovernedTraining's example on the simulator, the advice it prints to stderr compared as its output."""
    from gpudvfs.govern.integrations import GovernedTraining

    class ToStdout:  # doctest compares stdout only; sys.stdout is doctest's own while an example runs
        def write(self, text):
            return sys.stdout.write(text)

        def flush(self):
            sys.stdout.flush()

    monkeypatch.setattr(sys, "stderr", ToStdout())
    tests = doctest.DocTestFinder(recurse=False).find(GovernedTraining, "GovernedTraining")
    assert tests and tests[0].examples
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of GovernedTraining failed"
