from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
WHO_AND_WHEN = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "who_and_when"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def who_and_when() -> Path:
    if not WHO_AND_WHEN.is_dir():
        pytest.skip(f"the Who&When logs are not present at {WHO_AND_WHEN} (../shared/data)")
    return WHO_AND_WHEN
