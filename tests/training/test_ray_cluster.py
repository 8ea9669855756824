"""training.ray_cluster: the embedded head starts with token auth, is reused while up, and is stopped only by
the labbot that owns it."""

from __future__ import annotations

import stat
from pathlib import Path

from training.ray_cluster import EmbeddedRayHead, connect, dashboard_alive


def test_embedded_head_start_reuse_stop(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = EmbeddedRayHead(home)
    conn = first.ensure()
    try:
        assert conn.embedded and conn.address.startswith("http://127.0.0.1:")
        assert stat.S_IMODE((home / "ray" / "auth_token").stat().st_mode) == 0o600
        assert dashboard_alive(conn.address, conn.token)
        assert not dashboard_alive(conn.address, None), "the head must require its token"
        assert len(str(first.temp_dir)) < 40  # Ray's socket paths must stay under 107 bytes

        # a restarted labbot (same LABBOT_HOME) reuses the head: jobs keep running
        second = EmbeddedRayHead(home)
        assert second.ensure() == conn
        second.stop()
        assert not dashboard_alive(conn.address, conn.token, timeout=1.0)
    finally:
        first.stop()


def test_an_external_cluster_is_used_as_given_and_never_started(tmp_path: Path) -> None:
    conn, head = connect(tmp_path, "127.0.0.1:8265", "tok")
    assert head is None and conn.address == "http://127.0.0.1:8265" and conn.headers == {"Authorization": "Bearer tok"}
    assert not (tmp_path / "ray").exists()
