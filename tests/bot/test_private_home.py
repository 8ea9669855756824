"""Security finding 11, after a real start: LABBOT_HOME is 0700 and the database and its WAL in it 0600."""

from __future__ import annotations

import os
import stat

from support import Serve


def test_labbot_home_is_0700_and_its_database_0600_after_start(serve: Serve) -> None:
    assert stat.S_IMODE(os.stat(serve.home).st_mode) == 0o700
    with serve.client() as api:
        assert api.get("/runs").status_code == 200  # the database is open and used
    for name in ("labbot.db", "labbot.db-wal", "admin_token"):
        path = serve.home / name
        if name != "labbot.db-wal" or path.exists():
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(serve.home / "artifacts").st_mode) == 0o700
