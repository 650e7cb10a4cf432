"""``require``: a test's reference implementation is never silently missing under CI."""

from __future__ import annotations

import pytest

from conftest import require


def test_a_missing_reference_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no_such_reference"):
        require("no_such_reference")


def test_a_missing_reference_skips_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="pip install"):
        require("no_such_reference")


def test_a_present_reference_is_the_module():
    import json

    assert require("json") is json
