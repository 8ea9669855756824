"""A renamed role (``babysitter`` -> ``investigator``) in labbot.toml: the old name still works with one warning line
naming the new key, the new name works silently, both at once is a ``BadRequest`` saying which to keep — in
``[mcp.roles]`` and in ``[agents.ab] roles``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.roles import RENAMED, load_roles
from labbot.bot.config import Settings
from labbot.common.errors import BadRequest

TOOLS = {"tools": ["lab__run_logs"]}


def mcp_roles(roles: dict[str, object]) -> McpSettings:
    return McpSettings.from_config({"mcp": {"roles": roles}}, builtins=("lab",))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def ab_settings(tmp_path: Path, roles: list[str]) -> Settings:
    config = tmp_path / "labbot.toml"
    listed = ", ".join(f'"{r}"' for r in roles)
    config.write_text(f'[agents.ab]\nmodels = ["model-a", "model-b"]\nroles = [{listed}]\n')
    return Settings.from_env({"LABBOT_CONFIG": str(config), "LABBOT_HOME": str(tmp_path / "home")})


def test_the_old_name_is_no_role_and_names_one() -> None:
    roles = load_roles()
    assert RENAMED == {"babysitter": "investigator"}
    assert all(new in roles and old not in roles for old, new in RENAMED.items())


def test_an_old_mcp_roles_table_is_the_new_roles_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        settings = mcp_roles({"babysitter": TOOLS})
    assert set(settings.roles) == {"investigator"}
    assert settings.allows("investigator", "lab__run_logs") and not settings.allows("investigator", "lab__stop_run")
    assert warnings(caplog) == [
        "labbot.toml: [mcp.roles.babysitter] names the investigator role by its old name; "
        "write [mcp.roles.investigator] instead"
    ]


def test_the_new_mcp_roles_table_is_read_silently(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        settings = mcp_roles({"investigator": TOOLS, "assistant": {"tools": ["lab__*"]}})
    assert set(settings.roles) == {"investigator", "assistant"} and warnings(caplog) == []


def test_both_mcp_roles_tables_are_refused_saying_which_to_keep() -> None:
    with pytest.raises(BadRequest) as e:
        mcp_roles({"babysitter": TOOLS, "investigator": TOOLS})
    assert e.value.message == (
        "labbot.toml: [mcp.roles.babysitter] and [mcp.roles.investigator] both set the investigator role "
        "('babysitter' is its old name): keep [mcp.roles.investigator] and remove [mcp.roles.babysitter]"
    )


def test_an_old_role_in_the_ab_tests_roles_is_the_new_one_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        ab = ab_settings(tmp_path, ["babysitter", "assistant"]).ab_test
    assert ab is not None and ab.roles == ("investigator", "assistant")
    assert ab.applies_to("investigator") and not ab.applies_to("eval-writer")
    assert warnings(caplog) == [
        'labbot.toml: [agents.ab] roles "babysitter" names the investigator role by its old name; '
        'write [agents.ab] roles "investigator" instead'
    ]


def test_the_ab_tests_new_role_name_is_silent_and_both_names_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        ab = ab_settings(tmp_path, ["investigator"]).ab_test
    assert ab is not None and ab.roles == ("investigator",) and warnings(caplog) == []
    with pytest.raises(BadRequest, match=r'keep \[agents.ab\] roles "investigator" and remove'):
        _ = ab_settings(tmp_path, ["babysitter", "investigator"]).ab_test
