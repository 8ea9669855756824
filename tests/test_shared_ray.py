"""The run's shared Ray head (``tests/shared_ray.py``): a second user reuses the first's head, and it stops only when
the last user leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_ray import shared_head

from labbot.training.ray_cluster import dashboard_alive


@pytest.mark.subprocess
def test_the_second_user_reuses_the_head_and_the_last_to_leave_stops_it(tmp_path: Path) -> None:
    with shared_head(tmp_path, "gw0", workers=2) as first:
        with shared_head(tmp_path, "gw1", workers=2) as second:
            assert (second.address, second.token) == (first.address, first.token)
        assert dashboard_alive(first.address, first.token), "stopped while gw0 still used it"
    assert not dashboard_alive(first.address, first.token), "left running after its last user"
    assert not any((tmp_path / "users").iterdir())
