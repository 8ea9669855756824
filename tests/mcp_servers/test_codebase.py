"""The ``codebase`` MCP server through ``mcp.Client`` in memory: every tool, and every refusal, over a real git repo."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.types import TextContent

from labbot.mcp_servers import BUILTINS
from labbot.mcp_servers.codebase import MAX_OUTPUT, ROOT_ENV, build_server

SECRET = "sk-FAKE-SECRET-0123456789"
TOOLS = {"search", "read_file", "list_dir", "git_log", "git_show", "git_diff", "git_blame"}
GIT_ENV = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@lab", "GIT_COMMITTER_NAME": "Ada"}
GIT_ENV |= {"GIT_COMMITTER_EMAIL": "ada@lab", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repo with two commits, an uncommitted change, committed secrets and symlinks in and out of it."""
    base = tmp_path_factory.mktemp("codebase")
    outside = base / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0 TRAIN_MARKER\n")
    repo = base / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "config").mkdir()
    (repo / "README.md").write_text("# demo\nA tiny repo.\n")
    (repo / "src" / "app.py").write_text("def train(lr):\n    return lr * 2  # TRAIN_MARKER\n")
    (repo / ".env").write_text(f"API_KEY={SECRET}\nTRAIN_MARKER=1\n")
    (repo / ".env.local").write_text(f"API_KEY={SECRET}\n")
    (repo / "config" / "credentials.json").write_text(f'{{"key": "{SECRET}", "m": "TRAIN_MARKER"}}\n')
    (repo / "deploy.pem").write_text(f"-----BEGIN {SECRET} TRAIN_MARKER\n")
    (repo / "my_secret.txt").write_text(f"{SECRET} TRAIN_MARKER\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first: train and secrets")
    (repo / "src" / "app.py").write_text("def train(lr):\n    return lr * 3  # TRAIN_MARKER\n")
    (repo / ".env").write_text(f"API_KEY={SECRET}-rotated\n")
    (repo / "big.txt").write_text("".join(f"line {i} BIG_MARKER {'x' * 60}\n" for i in range(3000)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second: lr times three")
    (repo / "src" / "app.py").write_text("def train(lr):\n    return lr * 4  # TRAIN_MARKER\n")  # not committed
    (repo / "escape").symlink_to(outside / "passwd")
    (repo / "escape_dir").symlink_to(outside)
    (repo / "app_link.py").symlink_to("src/app.py")
    (repo / "env_link").symlink_to(".env")
    return repo


@pytest.fixture(scope="module")
def server(repo: Path) -> MCPServer:
    return build_server(repo)


def call(server: MCPServer, tool: str, **args: Any) -> tuple[bool, str]:
    """Call one tool through a fresh in-memory ``mcp.Client``: (is_error, the text it returned)."""

    async def go() -> tuple[bool, str]:
        async with Client(server) as client:
            result = await client.call_tool(tool, args)
        return result.is_error, "\n".join(b.text for b in result.content if isinstance(b, TextContent))

    return asyncio.run(go())


def ok(server: MCPServer, tool: str, **args: Any) -> str:
    is_error, text = call(server, tool, **args)
    assert not is_error, text
    return text


def refused(server: MCPServer, tool: str, **args: Any) -> str:
    is_error, text = call(server, tool, **args)
    assert is_error, text
    assert SECRET not in text and "root:x" not in text
    return text


def test_every_tool_is_listed_read_only(server: MCPServer) -> None:
    async def go() -> Any:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    tools = asyncio.run(go())
    assert {t.name for t in tools} == TOOLS
    for t in tools:
        assert t.annotations is not None and t.annotations.read_only_hint is True, t.name
        assert t.annotations.destructive_hint is False, t.name
        assert t.description and "Args" not in t.description, t.name
    assert "codebase" in BUILTINS


SEARCHERS = ["python", pytest.param("ripgrep", marks=pytest.mark.skipif(not shutil.which("rg"), reason="no rg"))]


@pytest.mark.parametrize("search_with", SEARCHERS)
def test_search_finds_code_and_never_secrets(repo: Path, search_with: Any) -> None:
    server = build_server(repo, search_with=search_with)
    text = ok(server, "search", query="TRAIN_MARKER")
    assert "src/app.py:2:     return lr * 4  # TRAIN_MARKER" in text
    for leak in (SECRET, ".env", "credentials", "deploy.pem", "my_secret", "root:x", "escape", ".git/"):
        assert leak not in text, leak
    # a path_glob cannot bring a secret back
    for glob in (".env", ".env*", "*.pem", "*secret*", "credentials.json", "**/config/*"):
        assert ok(server, "search", query="TRAIN_MARKER", path_glob=glob).startswith("no matches"), glob
    assert "src/app.py:1:" in ok(server, "search", query=r"def \w+\(lr\)", path_glob="*.py")
    assert "src/app.py:2:" in ok(server, "search", query="lr * 4", literal=True)
    assert "README.md:1: # demo" in ok(server, "search", query="# DEMO", literal=True, ignore_case=True)
    # a leading '-' is a query, not a flag
    assert ok(server, "search", query="-> None", literal=True).startswith("no matches")
    assert ok(server, "search", query="--files").startswith("no matches")
    hits = ok(server, "search", query="BIG_MARKER", max_results=5).splitlines()
    assert len(hits) == 6 and hits[0].startswith("big.txt:1: line 0") and hits[-1].startswith("…(cut")


def test_search_refuses_a_bad_regex_and_says_what_to_do(server: MCPServer) -> None:
    assert "literal=true" in refused(server, "search", query="train(")
    assert "query is empty" in refused(server, "search", query="")


def test_read_file_whole_range_and_cut(server: MCPServer) -> None:
    text = ok(server, "read_file", path="src/app.py")
    assert text.splitlines() == [
        "src/app.py: lines 1-2 of 2",
        "     1\tdef train(lr):",
        "     2\t    return lr * 4  # TRAIN_MARKER",
    ]
    assert ok(server, "read_file", path="./src/../src/app.py", start_line=2, end_line=2).splitlines() == [
        "src/app.py: lines 2-2 of 2",
        "     2\t    return lr * 4  # TRAIN_MARKER",
    ]
    assert ok(server, "read_file", path="big.txt", start_line=2, end_line=3).splitlines()[0] == "big.txt: lines 2-3"
    assert "src/app.py: lines 1-2" in ok(server, "read_file", path="app_link.py")  # a link inside the root is fine
    big = ok(server, "read_file", path="big.txt")
    assert len(big.encode()) < MAX_OUTPUT + 200 and "…(cut at 64 KiB: read on with start_line=" in big
    resume = int(big.rsplit("start_line=", 1)[1].rstrip(")"))
    assert ok(server, "read_file", path="big.txt", start_line=resume).splitlines()[1].startswith(f"{resume:>6}\tline")
    assert "nothing from line 99" in ok(server, "read_file", path="README.md", start_line=99)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../etc/passwd", "outside the repository root"),
        ("src/../../outside/passwd", "outside the repository root"),
        ("/etc/passwd", "absolute paths are refused"),
        ("escape", "symlinks that lead out of it are refused"),
        ("escape_dir/passwd", "outside the repository root"),
    ],
)
def test_paths_are_confined_to_the_root(server: MCPServer, path: str, message: str) -> None:
    assert message in refused(server, "read_file", path=path)
    assert message in refused(server, "git_blame", path=path)
    assert message in refused(server, "git_log", path=path)


@pytest.mark.parametrize(
    "path",
    [".env", ".env.local", "src/../.env", "env_link", "config/credentials.json", "deploy.pem", "my_secret.txt",
     ".git/config", ".git/HEAD", ".GIT/config", "DEPLOY.PEM"],
)  # fmt: skip
def test_secrets_and_git_internals_are_never_read(server: MCPServer, path: str) -> None:
    assert "withheld" in refused(server, "read_file", path=path)
    assert "withheld" in refused(server, "git_log", path=path)


def test_list_dir_shows_types_and_sizes_and_hides_secrets(server: MCPServer, repo: Path) -> None:
    text = ok(server, "list_dir")
    assert f"file  {(repo / 'README.md').stat().st_size:>10}  README.md" in text
    assert "dir               src/" in text and "app_link.py → src/app.py" in text
    assert "escape → outside the root or withheld" in text and "env_link → outside the root or withheld" in text
    for hidden in (".env", ".git/", "deploy.pem", "my_secret.txt"):
        assert f" {hidden}\n" not in text + "\n" and f" {hidden}/" not in text, hidden
    assert "(5 withheld:" in text  # .env, .env.local, .git, deploy.pem, my_secret.txt
    assert "config/: 0 entries" in ok(server, "list_dir", path="config") and "(1 withheld" in ok(
        server, "list_dir", path="config"
    )
    assert "withheld" in refused(server, "list_dir", path=".git")
    assert "outside the repository root" in refused(server, "list_dir", path="escape_dir")
    assert "not a directory" in refused(server, "list_dir", path="README.md")


def test_git_tools_answer_and_leave_secrets_out(server: MCPServer) -> None:
    log = ok(server, "git_log").splitlines()
    assert [line.split("  ", 1)[1] for line in log] == ["second: lr times three", "first: train and secrets"]
    assert "Ada" in log[0]
    assert len(ok(server, "git_log", path="src/app.py", max_count=1).splitlines()) == 1
    assert "first: train" in ok(server, "git_log", revision="main~1")
    assert "first: train" not in ok(server, "git_log", revision="main~1..main")
    # .env sorts first in a diff: had it not been left out, it would be there before the 64 KB cut
    for show, changed in ((ok(server, "git_show"), "big.txt"), (ok(server, "git_show", revision="HEAD~1"), "src/app")):
        assert changed in show and SECRET not in show and ".env" not in show and "credentials" not in show
    assert "-    return lr * 2" in ok(server, "git_show", revision="HEAD", path="src/app.py")
    assert "+    return lr * 4" in ok(server, "git_diff")  # the work tree against HEAD
    diff = ok(server, "git_diff", base="HEAD~1", target="HEAD")
    assert "big.txt" in diff and SECRET not in diff and ".env" not in diff
    assert "+    return lr * 3" in ok(server, "git_diff", base="HEAD~1", target="HEAD", path="src")
    assert "src/app.py" in ok(server, "git_diff", base="HEAD~1", stat=True)
    blame = ok(server, "git_blame", path="src/app.py", start_line=1, end_line=1).splitlines()
    assert len(blame) == 1 and "Ada" in blame[0] and "def train(lr):" in blame[0]
    big = ok(server, "git_show", revision="HEAD", path="big.txt")
    assert "…(cut at 64 KiB: pass a path or a narrower range)" in big and len(big.encode()) < MAX_OUTPUT + 200


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("git_log", {"path": "--output={out}"}),
        ("git_log", {"revision": "--output={out}"}),
        ("git_show", {"revision": "--output={out}"}),
        ("git_show", {"path": "--output={out}"}),
        ("git_diff", {"base": "--output={out}"}),
        ("git_diff", {"base": "HEAD", "target": "--output={out}"}),
        ("git_blame", {"path": "--output={out}"}),
    ],
)
def test_git_options_cannot_be_injected(server: MCPServer, tmp_path: Path, tool: str, args: dict[str, str]) -> None:
    out = tmp_path / "x"
    text = refused(server, tool, **{k: v.format(out=out) for k, v in args.items()})
    assert "starts with '-': options are not accepted" in text
    assert not out.exists()


def test_revisions_name_commits_only(server: MCPServer, repo: Path) -> None:
    assert "REV:path is not accepted" in refused(server, "git_show", revision="HEAD:.env")
    blob = git(repo, "rev-parse", "HEAD:.env").strip()
    assert "not a commit" in refused(server, "git_show", revision=blob)
    assert "not a commit" in refused(server, "git_diff", base=blob, target="HEAD")
    assert "not a commit" in refused(server, "git_log", revision=f"HEAD..{blob}")
    assert "only accepted by git_log" in refused(server, "git_show", revision="HEAD~1..HEAD")
    assert "target needs a base" in refused(server, "git_diff", target="HEAD")


def test_errors_are_tool_errors_and_the_server_keeps_answering(server: MCPServer) -> None:
    assert "no file 'nope.py'" in refused(server, "read_file", path="nope.py")
    assert "is a directory: use list_dir" in refused(server, "read_file", path="src")
    assert "end_line 1 is before start_line 2" in refused(
        server, "read_file", path="README.md", start_line=2, end_line=1
    )
    assert "not a file" in refused(server, "git_blame", path="src")
    assert "not a commit" in refused(server, "git_show", revision="no-such-branch")
    assert "README.md" in ok(server, "list_dir")


def test_root_comes_from_the_environment_and_git_is_optional(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    (plain / "pkg").mkdir(parents=True)
    (plain / "pkg" / "mod.py").write_text("VALUE = 42\n")
    (plain / ".env").write_text(f"VALUE={SECRET}\n")
    monkeypatch.setenv(ROOT_ENV, str(plain))
    server = BUILTINS["codebase"]()
    assert "pkg/" in ok(server, "list_dir")
    assert ok(server, "search", query="VALUE") == "pkg/mod.py:1: VALUE = 42"
    assert "git log failed" in refused(server, "git_log")
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="is not a directory"):
        build_server()


# -- labbot's home, ignored files, credential files, token shapes, pathological regexes (the security review) --

HOME_TOKEN = "f3a9c1e07b5d42e8a6c4b2d0e9f8a7c6"
CREDENTIAL_FILES = [
    ".envrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".aws/config",
    ".docker/config.json",
    "deploy/prod.env",
    "service-account-prod.json",
    "ops/kubeconfig",
    "infra/prod.tfvars",
    "conf/tokens.yaml",
    "passwords.txt",
    "ops/db_password",
    # from the maintained lists (whispers' file-known rule, tell-me-your-secrets' file signatures)
    "pip.conf",
    ".config/hub",
    ".bashrc",
    "keys/deploy_ed25519",
    "vault.kdb",
    "profile/logins.json",
    "config/database.yml",
    ".vscode/sftp.json",
]
NOT_CREDENTIALS = [
    "tokenizer.json",
    "added_tokens.json",
    "src/token_counts.py",
    "docs/passwords_policy.md",
    "src/profile.py",
    "src/history.py",
    "src/settings.py",
    "experiments/train.yaml",
]
GITHUB_TOKEN = "ghp_" + "Zq7" * 12  # the shape of a GitHub token (ghp_ and 36 letters and digits)
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example access key id (split: no literal key in the source)


def _withheld_everywhere(server: MCPServer, path: str, marker: str) -> None:
    """``path`` (committed, holding ``marker``) is refused or left out by every tool, and ``marker`` never shows."""
    assert "withheld" in refused(server, "read_file", path=path)
    assert "withheld" in refused(server, "git_blame", path=path)
    assert "withheld" in refused(server, "git_log", path=path)
    assert "withheld" in refused(server, "git_show", path=path)
    assert "withheld" in refused(server, "git_diff", base="HEAD~1", target="HEAD", path=path)
    parent, _, name = path.rpartition("/")
    is_error, listing = call(server, "list_dir", path=parent or ".")
    rows = [] if is_error else [row.split("  ")[-1].strip() for row in listing.splitlines()[1:] if row[:4] != "…(cu"]
    assert name not in rows and f"{name}/" not in rows, listing
    searches = [
        ok(server, "search", query=marker),
        ok(server, "search", query=marker, path_glob=name),
        ok(server, "search", query=marker[:6] + ".*", ignore_case=True),
    ]
    history = [
        ok(server, "git_show"),
        ok(server, "git_show", revision="HEAD~1"),
        ok(server, "git_diff", base="HEAD~2", target="HEAD"),
        ok(server, "git_diff", base="HEAD~2"),
        ok(server, "git_diff", base="HEAD~2", stat=True),
    ]
    for text in searches:
        assert text.startswith("no matches") and "\n" not in text, (path, text)
    for text in history:
        assert marker not in text and name not in text, (path, text)


@pytest.fixture
def home_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """labbot's defaults: the codebase root is the current directory and LABBOT_HOME is ./.labbot, its tokens
    committed by mistake (and no .gitignore), plus a link into it."""
    repo = tmp_path / "repo"
    (repo / ".labbot" / "ray").mkdir(parents=True)
    (repo / "README.md").write_text("# demo\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    for name in ("admin_token", "mcp_token", "ray/auth_token", "labbot.log"):
        (repo / ".labbot" / name).write_text(f"{HOME_TOKEN}\n")
    (repo / "state_link").symlink_to(".labbot")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second: labbot's state, committed")
    (repo / "notes.md").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "third")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("LABBOT_HOME", raising=False)
    monkeypatch.delenv(ROOT_ENV, raising=False)
    return repo


@pytest.mark.parametrize("path", [".labbot/admin_token", ".labbot/mcp_token", ".labbot/ray/auth_token",
                                  ".labbot/labbot.log", "state_link/labbot.log"])  # fmt: skip
def test_labbots_home_is_never_served_with_the_defaults(home_repo: Path, path: str) -> None:
    server = BUILTINS["codebase"]()  # root: the current directory; home: LABBOT_HOME's default, ./.labbot
    assert "notes.md" in ok(server, "list_dir")
    _withheld_everywhere(server, path, HOME_TOKEN)
    assert "withheld" in refused(server, "list_dir", path=".labbot")
    assert HOME_TOKEN not in ok(server, "git_log", revision="HEAD~2..HEAD")


def test_labbots_home_is_never_served_wherever_it_is(home_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home_repo / ".labbot").rename(home_repo / "state")
    monkeypatch.setenv("LABBOT_HOME", str(home_repo / "state"))
    server = build_server(home_repo)
    for path in ("state/labbot.log", "state/ray/auth_token"):
        assert "labbot's own home" in refused(server, "read_file", path=path)
        assert "withheld" in refused(server, "git_blame", path=path)
    assert "state/" not in ok(server, "list_dir")
    assert ok(server, "search", query=HOME_TOKEN).startswith("no matches")
    monkeypatch.setenv("LABBOT_HOME", str(home_repo))  # a root inside labbot's home is refused outright
    with pytest.raises(ValueError, match="inside labbot's home"):
        build_server(home_repo / "state")


def test_files_git_ignores_are_refused_unless_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / "build").mkdir(parents=True)
    (repo / ".gitignore").write_text("build/\nscratch.txt\n")
    (repo / "kept.txt").write_text("IGNORED_MARKER kept\n")
    (repo / "scratch.txt").write_text("IGNORED_MARKER scratch\n")
    (repo / "build" / "out.txt").write_text("IGNORED_MARKER out\n")
    (repo / "link.txt").symlink_to("scratch.txt")  # a link git keeps, to a file it ignores
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    monkeypatch.delenv("LABBOT_CODEBASE_INCLUDE_IGNORED", raising=False)
    server = build_server(repo)
    for path in ("scratch.txt", "build/out.txt", "build/../scratch.txt", "link.txt"):
        assert "git ignores it" in refused(server, "read_file", path=path)
    assert "git ignores it" in refused(server, "list_dir", path="build")
    listing = ok(server, "list_dir")
    assert "kept.txt" in listing and "scratch.txt" not in listing and "build/" not in listing
    assert ok(server, "search", query="IGNORED_MARKER") == "kept.txt:1: IGNORED_MARKER kept"
    monkeypatch.setenv("LABBOT_CODEBASE_INCLUDE_IGNORED", "1")  # configured: served
    for configured in (build_server(repo), build_server(repo, include_ignored=True)):
        assert "IGNORED_MARKER scratch" in ok(configured, "read_file", path="scratch.txt")
        assert "build/out.txt:1:" in ok(configured, "search", query="IGNORED_MARKER")
        assert "scratch.txt" in ok(configured, "list_dir")


@pytest.fixture(scope="module")
def creds_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every common credential file committed (the second of three commits), and files that only look like one."""
    repo = tmp_path_factory.mktemp("creds") / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# demo\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    for i, rel in enumerate([*CREDENTIAL_FILES, *NOT_CREDENTIALS]):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(f"value = CRED{i:02d}MARKER\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second: credentials, committed")
    (repo / "notes.md").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "third")
    return repo


@pytest.mark.parametrize("search_with", SEARCHERS)
@pytest.mark.parametrize("index", range(len(CREDENTIAL_FILES)), ids=CREDENTIAL_FILES)
def test_common_credential_files_are_withheld_by_every_tool(creds_repo: Path, index: int, search_with: Any) -> None:
    server = build_server(creds_repo, search_with=search_with)
    _withheld_everywhere(server, CREDENTIAL_FILES[index], f"CRED{index:02d}MARKER")


@pytest.mark.parametrize("search_with", SEARCHERS)
def test_files_that_only_look_like_credentials_are_served(creds_repo: Path, search_with: Any) -> None:
    server = build_server(creds_repo, search_with=search_with)
    for i, rel in enumerate(NOT_CREDENTIALS, len(CREDENTIAL_FILES)):
        assert f"CRED{i:02d}MARKER" in ok(server, "read_file", path=rel), rel
        assert f"{rel}:1:" in ok(server, "search", query=f"CRED{i:02d}MARKER")


@pytest.mark.parametrize("search_with", SEARCHERS)
def test_token_shapes_are_withheld_from_any_file(tmp_path: Path, search_with: Any) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "settings.py").write_text("LR = 3e-4\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    (repo / "src" / "settings.py").write_text(
        f'LR = 3e-4\nGITHUB = "{GITHUB_TOKEN}"\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\nSTEPS = 100\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second: tokens in code")
    server = build_server(repo, search_with=search_with)
    text = ok(server, "read_file", path="src/settings.py")
    assert "     1\tLR = 3e-4" in text and "     4\tSTEPS = 100" in text and "«withheld: " in text
    outputs = [
        text,
        ok(server, "git_show"),
        ok(server, "git_show", path="src/settings.py"),
        ok(server, "git_diff", base="HEAD~1"),
        ok(server, "git_blame", path="src/settings.py"),
    ]
    for query in ("ghp_", "AKIA", "ghp_Zq7", "AKIA[A-Z0-9]{4}", "GITHUB", "(.+)+Z"):
        found = ok(server, "search", query=query)
        assert "withheld: they hold what looks like a secret" in found, (query, found)
        outputs.append(found)
    for out in outputs:
        assert GITHUB_TOKEN not in out and AWS_KEY not in out and "Zq7Zq7" not in out, out
    assert "src/settings.py:1: LR = 3e-4" in ok(server, "search", query="LR")


PATHOLOGICAL = ["(a+)+$", "(.+)+@", "(a|aa)+$", "(x+x+)+y"]


@pytest.mark.parametrize("search_with", SEARCHERS)
@pytest.mark.timeout(90, method="thread")  # today's Python re would hold the GIL for hours
def test_pathological_regexes_are_answered_at_once_and_the_server_keeps_answering(
    tmp_path: Path, search_with: Any
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a" * 5000 + "!\n" + "x" * 5000 + "\n")
    (repo / "b.py").write_text("def train(lr):\n    return lr\n")
    server = build_server(repo, search_with=search_with)

    async def go() -> tuple[float, float, float, list[str]]:
        async with Client(server) as searcher, Client(server) as other:
            stall, done = 0.0, False

            async def ticker() -> None:
                nonlocal stall
                while not done:
                    start = time.perf_counter()
                    await asyncio.sleep(0.01)
                    stall = max(stall, time.perf_counter() - start - 0.01)

            async def searches() -> tuple[float, list[str]]:
                start, texts = time.perf_counter(), []
                for query in PATHOLOGICAL:
                    result = await searcher.call_tool("search", {"query": query})
                    texts.append("\n".join(b.text for b in result.content if isinstance(b, TextContent)))
                return time.perf_counter() - start, texts

            async def listing() -> float:
                await asyncio.sleep(0.005)
                start = time.perf_counter()
                await other.call_tool("list_dir", {})
                return time.perf_counter() - start

            tick = asyncio.create_task(ticker())
            (took, texts), listed = await asyncio.gather(searches(), listing())
            done = True
            await tick
            return took, listed, stall, texts

    took, listed, stall, texts = asyncio.run(go())
    assert took < 5.0 and listed < 1.0 and stall < 0.5, (took, listed, stall)
    assert texts[0].startswith("no matches") and texts[1].startswith("no matches")
    assert "backreferences" in refused(server, "search", query=r"(a)\1")  # RE2: said, not run
