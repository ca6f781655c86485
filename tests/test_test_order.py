"""The test suite's own ordering rule: a test marked ``stops_app`` runs after its module's other tests."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_test_that_stops_the_shared_app_runs_after_the_others_of_its_module(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini('[pytest]\nmarkers =\n    stops_app: stops the shared application\n')
    pytester.makepyfile(
        test_first="""
import pytest
ran = []

@pytest.mark.stops_app
def test_stop():
    ran.append("stop")
    assert ran == ["one", "two", "stop"]

def test_one():
    ran.append("one")

def test_two():
    ran.append("two")
""",
        test_second="def test_after():\n    pass\n",
    )
    result = pytester.runpytest("-v", "-p", "no:randomly", "-p", "no:benchmark", "test_first.py", "test_second.py")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_first.py::test_one PASSED*", "*test_first.py::test_two PASSED*",
                                 "*test_first.py::test_stop PASSED*", "*test_second.py::test_after PASSED*"])
