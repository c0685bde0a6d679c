"""The grader rig the grader attacks share (tests/attacks/grader_rig.py)."""

import pytest
from grader_rig import Rig


@pytest.fixture
def rig(tmp_path, tiny_model):
    """A real grader on its unix socket over a workspace, with a host folder of sealed files."""
    with Rig(tmp_path, tiny_model) as made:
        yield made
