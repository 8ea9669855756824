"""The ``codebase`` MCP server: read-only search, file reading and git history over one repository root.

Agents (and people's MCP clients) reach it through ``mcp.Client``; ``labbot mcp codebase`` serves it over stdio or
``--http PORT`` via :mod:`labbot.mcp_servers.runner`. The root is the constructor's ``root``, else
``LABBOT_CODEBASE_ROOT``, else the current directory.

Every tool is annotated ``readOnlyHint`` and every refusal is a tool error (``is_error``) that says what is allowed:

- paths stay inside the root with symlinks resolved: ``..``, absolute paths and links that lead out are refused;
- withheld, never read, listed or searched, and left out of ``git_show``/``git_diff``/``git_log`` output: labbot's
  own home (``LABBOT_HOME``, default ``./.labbot``: its tokens) wherever it is, credential files
  (:data:`SECRET_PATTERNS`, matched case-insensitively against every path component, or a path's tail for patterns
  with a ``/``), ``.git/`` internals, and files git ignores (unless ``include_ignored`` or
  ``LABBOT_CODEBASE_INCLUDE_IGNORED=1``);
- contents are checked for well-known token shapes with detect-secrets' detectors (AWS, GitHub, Slack, private
  keys, JWTs, ``password = "…"``…): a found value is replaced by ``«withheld: TYPE»`` in ``read_file`` and git output,
  and a search never reports a line that holds one (so a regex cannot probe a token character by character);
- search runs RE2 (linear time, whatever the pattern) in a worker thread, with a deadline; backreferences and
  lookaround are not supported;
- a value that reaches git may not start with ``-`` (no option injection), revisions are commit-ish names only
  (``REV:path`` blobs are refused), and git runs with ``--no-pager``, ``GIT_TERMINAL_PROMPT=0``, a timeout and
  ``--`` before paths;
- output is capped at :data:`MAX_OUTPUT` bytes with a ``…(cut …)`` note saying how to ask for less.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import re2
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from labbot.common.api_client import home as labbot_home
from labbot.common.durations import format_duration
from labbot.common.humanize import format_bytes
from labbot.mcp_servers.annotations import READ

ROOT_ENV = "LABBOT_CODEBASE_ROOT"
MAX_OUTPUT = 64 * 1024
MAX_MATCHES = 500
MAX_ENTRIES = 500
MAX_LINE_CHARS = 400
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
TIMEOUT_S = 20.0
INCLUDE_IGNORED_ENV = "LABBOT_CODEBASE_INCLUDE_IGNORED"
_DATA_EXTS = ("txt", "yaml", "yml", "json", "toml", "ini", "cfg", "conf", "env", "csv")
_CREDENTIAL_WORDS = ("token", "tokens", "password", "passwords", "passwd", "apikey", "api_key", "api-key")
SECRET_PATTERNS = (
    # environment and tool credential files
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".s3cfg",
    ".boto",
    ".vault-token",
    ".terraformrc",
    "terraform.rc",
    ".htpasswd",
    ".dockercfg",
    ".docker/config.json",
    ".aws",
    ".ssh",
    ".kube",
    ".gnupg",
    "kubeconfig",
    "*.kubeconfig",
    "*.tfvars",
    "*.tfvars.json",
    "*.tfstate",
    "*.tfstate.*",
    "*service*account*.json",
    "*credentials*",
    "*secret*",
    ".*_history",
    ".*history",
    "pip.conf",
    "pip.ini",
    ".gitconfig",
    ".gitrobrc",
    ".bashrc",
    ".zshrc",
    ".cshrc",
    ".bash_profile",
    ".zprofile",
    ".profile",
    ".bash_aliases",
    ".muttrc",
    ".esmtprc",
    ".ftpconfig",
    ".tugboat",
    ".trc",
    "proftpdpasswd",
    "htpasswd",
    "database.yml",
    "mongoid.yml",
    "knife.rb",
    "omniauth.rb",
    "carrierwave.rb",
    "logins.json",
    "heroku.json",
    "robomongo.json",
    ".remote-sync.json",
    "deployment-config.json",
    "sftp-config.json",
    "sftp.json",
    "filezilla.xml",
    "recentservers.xml",
    "dbeaver-data-sources.xml",
    "WebServers.xml",
    "*BapSshPublisherPlugin.xml",
    "ventrilo_srv.ini",
    "otr.private_key",
    ".purple/accounts.xml",
    ".irssi/config",
    ".config/hub",
    "doctl/config.yaml",
    "keys.db",
    # keys and keystores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ovpn",
    "*.kdb",
    "*.kdbx",
    "*.ppk",
    "*.pkcs12",
    "*.keychain",
    "*.agilekeychain",
    "*.keyring",
    "*.keypair",
    "*.kwallet",
    "*.psafe3",
    "*.asc",
    "*.gpg",
    "*.cscfg",
    "*.rdp",
    "*.tblk",
    "*.bek",
    "*.tpm",
    "*.fve",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    # files named for what they hold: token, tokens.yaml, db_password, passwords.txt, api-key.json… (not a
    # tokenizer's added_tokens.json: "tokens" alone or as the whole stem only)
    *(f"{pre}{word}{ext}" for word in _CREDENTIAL_WORDS
      for pre in (("", ".") if word == "tokens" else ("", ".", "*_", "*-", "*."))
      for ext in ("", *(f".{e}" for e in _DATA_EXTS))),
)  # fmt: skip

_WITHHELD = (
    "labbot's home (LABBOT_HOME), credential files (.env, *.pem, .npmrc, .aws/, kubeconfig, *.tfvars, tokens.yaml, "
    "*_token, passwords.txt, *secret*, *credentials*…), files git ignores and .git/ internals are never read, "
    "listed or searched"
)
_REVISION = re.compile(r"[\w./@{}^~!+-]+")
_GIT_EXCLUDES = tuple(f":(exclude,glob,icase)**/{p}{tail}" for p in (*SECRET_PATTERNS, ".git") for tail in ("", "/**"))
_WALK_SKIP = {".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".tox"}
# detect-secrets' detectors of well-known token shapes; the entropy ones are left out (every commit hash and lock
# file would trip them) and so is the public-IP one (an address is not a credential)
_NOISY_DETECTORS = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}
_DETECTOR_CLASSES: dict[str, Any] = get_mapping_from_secret_type_to_class()
_DETECTORS = [_DETECTOR_CLASSES[kind]() for kind in sorted(_DETECTOR_CLASSES) if kind not in _NOISY_DETECTORS]
_MAX_SCANNED_LINE = 4096


def secrets_in(line: str) -> list[tuple[str, str]]:
    """The (type, text) of every well-known token shape in ``line`` (detect-secrets' detectors): the whole match of
    a pattern-based detector (some capture only a prefix, e.g. ``ghp``), the value for the keyword one."""
    found: list[tuple[str, str]] = []
    scanned = line[:_MAX_SCANNED_LINE]
    for detector in _DETECTORS:
        try:
            patterns = getattr(detector, "denylist", None)
            if patterns:
                found += [(detector.secret_type, m.group(0)) for rx in patterns for m in rx.finditer(scanned)]
            else:
                found += [(detector.secret_type, value) for value in detector.analyze_string(scanned)]
        except Exception:  # one detector's bug must not hide another's finding
            continue
    return [(kind, text) for kind, text in found if text]


def _holds_secret(line: str) -> bool:
    return len(line) > _MAX_SCANNED_LINE or bool(secrets_in(line))


def redact(text: str) -> str:
    """``text`` with every detected secret replaced by ``«withheld: TYPE»``; a long line that cannot be checked whole
    is withheld whole."""
    out = []
    for line in text.split("\n"):
        if len(line) > _MAX_SCANNED_LINE:
            out.append(f"«withheld: a line of {len(line)} characters is too long to check for secrets»")
            continue
        for kind, value in sorted(secrets_in(line), key=lambda found: -len(found[1])):  # longest first
            line = line.replace(value, f"«withheld: {kind}»")
        out.append(line)
    return "\n".join(out)


def is_secret(path: PurePosixPath | Path) -> bool:
    """Whether any component of ``path`` is a secret or ``.git``: such paths are never shown."""
    return any(_secret_name(part) for part in path.parts) or _secret_path(path)


def _secret_name(name: str) -> bool:
    lower = name.lower()
    return lower == ".git" or _NAME_RE.match(lower) is not None


def _secret_path(path: PurePosixPath | Path) -> bool:
    lower = PurePosixPath(path.as_posix().lower())
    return any(q.match(p) for q in (lower, *lower.parents) if q.parts and q.name for p in _PATH_PATTERNS)


_NAME_PATTERNS = tuple(p for p in SECRET_PATTERNS if "/" not in p)
_PATH_PATTERNS = tuple(p for p in SECRET_PATTERNS if "/" in p)
_NAME_RE = re.compile("|".join(fnmatch.translate(p) for p in _NAME_PATTERNS))


def _cut(text: str, hint: str) -> str:
    data = text.encode()
    if len(data) <= MAX_OUTPUT:
        return text
    return data[:MAX_OUTPUT].decode(errors="ignore") + f"\n…(cut at {format_bytes(MAX_OUTPUT)}: {hint})"


def _no_option(value: str, what: str) -> str:
    if value.startswith("-"):
        raise ToolError(f"{what} {value!r} starts with '-': options are not accepted, only {what}s")
    return value


@dataclass
class _Run:
    rc: int
    out: bytes
    err: str
    cut: bool


def _run_capped(cmd: list[str], cwd: Path, *, limit: int, env: dict[str, str] | None = None) -> _Run:
    """Run ``cmd`` reading at most ``limit`` bytes of stdout; killed at the limit or after ``TIMEOUT_S``."""
    expired = threading.Event()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(TIMEOUT_S, expire)
        timer.start()
        try:
            assert proc.stdout is not None
            out = proc.stdout.read(limit + 1)
            if len(out) > limit:
                proc.kill()
            proc.stdout.close()
            rc = proc.wait()
        finally:
            timer.cancel()
        err.seek(0)
        stderr = err.read(4096).decode(errors="replace").strip()
    if expired.is_set() and len(out) <= limit:
        raise ToolError(
            f"{cmd[0]} took over {format_duration(TIMEOUT_S)} and was stopped: narrow the path, range or query"
        )
    return _Run(rc, out[:limit], stderr, len(out) > limit)


class Codebase:
    """The tools' logic over one root; each public method is one MCP tool and raises ``ToolError`` to refuse."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        search_with: Literal["auto", "ripgrep", "python"] = "auto",
        include_ignored: bool | None = None,
        home: str | Path | None = None,
    ):
        self.root = Path(root or os.environ.get(ROOT_ENV) or ".").expanduser().resolve()
        if not self.root.is_dir():
            raise ValueError(f"codebase root {self.root} is not a directory (set {ROOT_ENV} or pass root)")
        # labbot's own state (its tokens) is never served, wherever LABBOT_HOME is
        self.home = Path(home).expanduser().resolve() if home else labbot_home()
        if self.root.is_relative_to(self.home):
            raise ValueError(f"codebase root {self.root} is inside labbot's home {self.home}: it is never served")
        self.home_rel = self.home.relative_to(self.root).as_posix() if self.home.is_relative_to(self.root) else None
        if include_ignored is None:
            include_ignored = os.environ.get(INCLUDE_IGNORED_ENV, "").lower() in ("1", "true", "yes")
        self.include_ignored = include_ignored
        self.rg = shutil.which("rg") if search_with != "python" else None
        if search_with == "ripgrep" and self.rg is None:
            raise ValueError("search_with='ripgrep' but rg is not on PATH")

    # -- paths -------------------------------------------------------------------------------------------------

    def _resolve(self, path: str | None) -> tuple[Path, str]:
        """The real path inside the root and its root-relative spelling, or a ToolError saying what is allowed."""
        raw = (path or ".").strip() or "."
        if "\0" in raw:
            raise ToolError("paths may not contain NUL bytes")
        if os.path.isabs(raw):
            raise ToolError(f"absolute paths are refused ({raw!r}): give a path relative to the repository root")
        real = (self.root / raw).resolve()
        if not real.is_relative_to(self.root):
            raise ToolError(
                f"{raw!r} is outside the repository root: paths must stay inside it "
                "('..' and symlinks that lead out of it are refused)"
            )
        rel = real.relative_to(self.root)
        if self._home(self.root / raw) or self._home(real):
            raise ToolError(f"{raw!r} is withheld: it is in labbot's own home (LABBOT_HOME); {_WITHHELD}")
        if is_secret(PurePosixPath(raw)) or is_secret(rel):
            raise ToolError(f"{raw!r} is withheld: {_WITHHELD}")
        if rel.as_posix() != "." and self._ignored([rel.as_posix()]):  # the real path: git refuses paths in links
            raise ToolError(
                f"{raw!r} is withheld: git ignores it (.gitignore), and ignored files are not served "
                f"unless {INCLUDE_IGNORED_ENV}=1; {_WITHHELD}"
            )
        return real, rel.as_posix()

    def _home(self, path: Path) -> bool:
        """Whether ``path`` (absolute, as given or resolved) is in labbot's home."""
        return Path(os.path.normpath(path)).is_relative_to(self.home) or path.resolve().is_relative_to(self.home)

    def _visible(self, rel: str) -> bool:
        """Whether a path found by a search may be shown: not a secret nor labbot's home, and really inside the root."""
        real = (self.root / rel).resolve()
        inside = real.is_relative_to(self.root) and not self._home(self.root / rel)
        if not inside or is_secret(PurePosixPath(rel)) or is_secret(real.relative_to(self.root)):
            return False
        # a link that git does not ignore may lead to a file it does: ask about the file (links are rare)
        target = real.relative_to(self.root).as_posix()
        return target == rel or not self._ignored([target])

    @functools.cache  # noqa: B019 — one Codebase per server, for the server's life
    def _in_git(self) -> bool:
        check = ["git", "rev-parse", "--is-inside-work-tree"]
        return _run_capped(check, self.root, limit=1024, env=_git_env()).out.strip() == b"true"

    def _ignored(self, rels: list[str]) -> set[str]:
        """Those of ``rels`` (or of their folders) that git ignores; none when ignored files are served or no git."""
        if self.include_ignored or not rels:
            return set()
        asked = {str(PurePosixPath(r)) for r in rels if r not in ("", ".")}
        every = asked | {str(parent) for r in asked for parent in PurePosixPath(r).parents if str(parent) != "."}
        try:
            run = subprocess.run(
                ["git", "check-ignore", "-z", "--stdin"],
                cwd=self.root,
                input="\0".join(sorted(every)).encode() + b"\0",
                capture_output=True,
                timeout=TIMEOUT_S,
                env=_git_env(),
            )
        except subprocess.TimeoutExpired as e:
            raise ToolError("git check-ignore took too long: try again") from e
        if run.returncode not in (0, 1):
            if not self._in_git():
                return set()  # not a git work tree: nothing is ignored
            why = run.stderr.decode(errors="replace")[:300]
            raise ToolError(f"git check-ignore failed, so nothing is shown: {why}")
        ignored = {p for p in run.stdout.decode(errors="replace").split("\0") if p}
        return {r for r in asked if r in ignored or any(str(d) in ignored for d in PurePosixPath(r).parents)}

    # -- files -------------------------------------------------------------------------------------------------

    def read_file(
        self,
        path: Annotated[str, Field(description="file path relative to the repository root")],
        start_line: Annotated[int | None, Field(description="first line to show, 1-based", ge=1)] = None,
        end_line: Annotated[int | None, Field(description="last line to show, inclusive", ge=1)] = None,
    ) -> str:
        """Read a text file of the repository, with line numbers (optionally only lines start_line..end_line)."""
        real, rel = self._resolve(path)
        if real.is_dir():
            raise ToolError(f"{rel!r} is a directory: use list_dir")
        if not real.is_file():
            raise ToolError(f"no file {rel!r} in the repository: use list_dir or search to find it")
        start = start_line or 1
        if end_line is not None and end_line < start:
            raise ToolError(f"end_line {end_line} is before start_line {start}")
        shown: list[str] = []
        last, size, more, cut = 0, 0, False, False
        with real.open("rb") as f:
            if b"\0" in f.read(8192):
                raise ToolError(
                    f"{rel!r} is a binary file ({format_bytes(real.stat().st_size)}): only text files are shown"
                )
            f.seek(0)
            for n, line in enumerate(_lines(f), 1):
                if end_line is not None and n > end_line:
                    more = True
                    break
                last = n
                if n < start:
                    continue
                size += len(line.encode()) + 8
                if size > MAX_OUTPUT:
                    last, cut = n - 1, True
                    break
                shown.append(f"{n:>6}\t{redact(line)}")
        if not shown:
            return f"{rel}: {last} lines, nothing from line {start}" if last else f"{rel}: empty file"
        head = f"{rel}: lines {start}-{last}" + ("" if more or cut else f" of {last}")
        tail = [f"…(cut at {format_bytes(MAX_OUTPUT)}: read on with start_line={last + 1})"] if cut else []
        return "\n".join([head, *shown, *tail])

    def list_dir(
        self, path: Annotated[str, Field(description="directory relative to the repository root")] = "."
    ) -> str:
        """List a directory: one line per entry with its type (dir, file, link) and size in bytes."""
        real, rel = self._resolve(path)
        if not real.is_dir():
            raise ToolError(f"{rel!r} is not a directory: use read_file for files")
        entries = sorted(os.scandir(real), key=lambda e: e.name)
        ignored = self._ignored([f"{rel}/{e.name}" if rel != "." else e.name for e in entries])
        rows, withheld = [], 0
        for e in entries:
            child = f"{rel}/{e.name}" if rel != "." else e.name
            in_home = Path(e.path).is_relative_to(self.home)  # a link into it is shown as withheld, below
            if _secret_name(e.name) or is_secret(PurePosixPath(child)) or in_home or child in ignored:
                withheld += 1
            elif e.is_symlink():
                target = Path(e.path).resolve()
                inside = target.is_relative_to(self.root) and not is_secret(target.relative_to(self.root))
                inside = inside and not self._home(target)
                inside = inside and not self._ignored([target.relative_to(self.root).as_posix()])
                to = f"→ {target.relative_to(self.root).as_posix()}" if inside else "→ outside the root or withheld"
                rows.append(f"link  {'':>10}  {e.name} {to}")
            elif e.is_dir(follow_symlinks=False):
                rows.append(f"dir   {'':>10}  {e.name}/")
            else:
                rows.append(f"file  {e.stat(follow_symlinks=False).st_size:>10}  {e.name}")
        out = [f"{rel}/: {len(rows)} entries", *rows[:MAX_ENTRIES]]
        if len(rows) > MAX_ENTRIES:
            out.append(f"…(cut: first {MAX_ENTRIES} of {len(rows)} entries; search with a path_glob instead)")
        if withheld:
            out.append(f"({withheld} withheld: {_WITHHELD})")
        return _cut("\n".join(out), "list a subdirectory")

    # -- search ------------------------------------------------------------------------------------------------

    def search(
        self,
        query: Annotated[str, Field(description="a regular expression (or the literal text with literal=true)")],
        path_glob: Annotated[str | None, Field(description="only files matching this glob, e.g. '*.py'")] = None,
        literal: Annotated[bool, Field(description="match query as plain text, not a regex")] = False,
        ignore_case: bool = False,
        max_results: Annotated[int, Field(description=f"at most this many matches (≤ {MAX_MATCHES})", ge=1)] = 100,
    ) -> str:
        """Search the repository's files for a regex (RE2 syntax) or literal text; one `path:line: text` per match.

        Uses ripgrep when it is on PATH, else RE2 over the files git knows about; both honour .gitignore. Secrets,
        labbot's home and .git/ internals are never searched, and a line holding a token is never reported.
        """
        if not query:
            raise ToolError("query is empty: give a regex or, with literal=true, the text to find")
        limit = min(max_results, MAX_MATCHES)
        pattern = _compile(query, literal, ignore_case)
        find = self._rg_search if self.rg else self._py_search
        hits, complete = find(query if self.rg else pattern, path_glob, literal, ignore_case, limit)
        shown = [h for h in hits if not _holds_secret(h[2])]
        hits, held = shown, len(hits) - len(shown)
        held_note = [f"({held} matching lines withheld: they hold what looks like a secret)"] if held else []
        if not hits:
            found = f"no matches for {query!r}" + (f" in files matching {path_glob!r}" if path_glob else "")
            return "\n".join([found, *held_note])
        lines = [f"{rel}:{n}: {text[:MAX_LINE_CHARS]}" for rel, n, text in hits[:limit]]
        if len(hits) > limit or not complete:
            lines.append(f"…(cut: first {min(len(hits), limit)} matches; narrow the query or pass a path_glob)")
        return _cut("\n".join([*lines, *held_note]), "narrow the query or pass a path_glob")

    def _rg_search(
        self, query: Any, glob: str | None, literal: bool, ignore_case: bool, limit: int
    ) -> tuple[list[tuple[str, int, str]], bool]:
        assert self.rg is not None and isinstance(query, str)
        cmd = [self.rg, "--no-config", "--no-heading", "--with-filename", "--line-number", "--null", "--color=never"]
        cmd += ["--hidden", "--no-messages", f"--max-filesize={MAX_SEARCH_FILE_BYTES}", "--max-columns=1000"]
        cmd += ["--fixed-strings"] if literal else []
        cmd += ["--ignore-case"] if ignore_case else []
        cmd += [f"--glob={glob}"] if glob else []
        # later globs win in ripgrep: the exclusions come last so no path_glob can bring a secret back
        cmd += [f"--iglob=!{p}" if "/" not in p else f"--iglob=!**/{p}" for p in (*SECRET_PATTERNS, ".git")]
        cmd += [f"--glob=!/{self.home_rel}"] if self.home_rel else []
        cmd += ["--no-ignore-vcs"] if self.include_ignored else []
        run = _run_capped([*cmd, "--regexp", query, "--", "."], self.root, limit=4 * MAX_OUTPUT + limit * 1024)
        if run.rc == 2 and not run.out:
            raise ToolError(f"ripgrep refused the search: {run.err or 'no message'}")
        hits: list[tuple[str, int, str]] = []
        for record in run.out.decode(errors="replace").splitlines():
            path, _, rest = record.partition("\0")
            number, _, text = rest.partition(":")
            rel = path.removeprefix("./")
            if number.isdigit() and self._visible(rel):
                hits.append((rel, int(number), text))
            if len(hits) > limit:
                break
        return hits, not run.cut

    def _py_search(
        self, query: Any, glob: str | None, literal: bool, ignore_case: bool, limit: int
    ) -> tuple[list[tuple[str, int, str]], bool]:
        pattern = query  # compiled by _compile: RE2, linear in the text whatever the pattern
        deadline = time.monotonic() + TIMEOUT_S
        hits: list[tuple[str, int, str]] = []
        for rel in self._files():
            if time.monotonic() > deadline:
                return hits, False
            if (glob and not _glob_match(rel, glob)) or not self._visible(rel):
                continue
            real = self.root / rel
            try:
                if not real.is_file() or real.stat().st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
                if n % 1024 == 0 and time.monotonic() > deadline:
                    return hits, False
                if pattern.search(line):
                    hits.append((rel, n, line))
                    if len(hits) > limit:
                        return hits, True
        return hits, True

    def _files(self) -> Iterator[str]:
        """The files a search looks at: those git tracks or would track, else a walk that skips build folders."""
        standard = [] if self.include_ignored else ["--exclude-standard"]
        run = _run_capped(
            ["git", "ls-files", "-z", "--cached", "--others", *standard],
            self.root,
            limit=64 * 1024 * 1024,
            env=_git_env(),
        )
        if run.rc == 0:
            listed = {p for p in run.out.decode(errors="replace").split("\0") if p}
            if self.include_ignored:  # every untracked file, build folders (.venv, node_modules…) aside
                listed = {p for p in listed if not _WALK_SKIP.intersection(PurePosixPath(p).parts)}
            yield from sorted(listed)
            return
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in _WALK_SKIP and not _secret_name(d))
            base = Path(dirpath).relative_to(self.root)
            for name in sorted(filenames):
                yield (base / name).as_posix()

    # -- git ---------------------------------------------------------------------------------------------------

    def _git(self, args: list[str], paths: list[str]) -> str:
        cmd = ["git", "--no-pager", "-c", "core.quotePath=false", "-c", "color.ui=never", *args, "--", *paths]
        run = _run_capped(cmd, self.root, limit=MAX_OUTPUT, env=_git_env())
        if run.rc != 0 and not run.cut:
            raise ToolError(f"git {args[0]} failed: {run.err or f'exit {run.rc}'}")
        text = redact(run.out.decode(errors="replace"))
        if run.cut:
            text += f"\n…(cut at {format_bytes(MAX_OUTPUT)}: pass a path or a narrower range)"
        return text or "(no output)"

    def _git_path(self, path: str | None) -> list[str]:
        excludes = [*_GIT_EXCLUDES, *([f":(exclude,literal,icase){self.home_rel}"] if self.home_rel else [])]
        if path is None:
            return [".", *excludes]
        _no_option(path, "path")
        return [f":(literal){self._resolve(path)[1]}", *excludes]

    def _commitish(self, revision: str, *, ranges: bool = False) -> str:
        """A revision that names commits (not blobs or trees), else a ToolError saying what is accepted."""
        _no_option(revision, "revision")
        if not _REVISION.fullmatch(revision):
            raise ToolError(
                f"revision {revision!r} is refused: give a commit-ish such as HEAD~2, main, v1.0 or a hash"
                " (REV:path is not accepted: pass path instead)"
            )
        sides = re.split(r"\.\.\.?", revision) if ranges else [revision]
        if len(sides) > 2 or (not ranges and ".." in revision):
            raise ToolError(f"revision {revision!r} is refused: ranges (A..B) are only accepted by git_log")
        for side in filter(None, sides):
            check = ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", side + "^{commit}"]
            if _run_capped(check, self.root, limit=1024, env=_git_env()).rc != 0:
                raise ToolError(f"{side!r} is not a commit in this repository: git_log lists revisions")
        return revision

    def git_log(
        self,
        path: Annotated[str | None, Field(description="only commits touching this file or directory")] = None,
        max_count: Annotated[int, Field(description="at most this many commits (≤ 200)", ge=1)] = 20,
        revision: Annotated[str | None, Field(description="a commit-ish or range, e.g. main or v1.0..HEAD")] = None,
    ) -> str:
        """The commit history, newest first: one line per commit with hash, date, author and subject."""
        revs = [self._commitish(revision, ranges=True)] if revision else []
        args = ["log", f"--max-count={min(max_count, 200)}", "--date=short", "--format=%h %ad %an  %s"]
        return self._git([*args, "--end-of-options", *revs], self._git_path(path))

    def git_show(
        self,
        revision: Annotated[str, Field(description="a commit-ish: a hash, branch, tag or HEAD~N")] = "HEAD",
        path: Annotated[str | None, Field(description="only this file's or directory's changes")] = None,
    ) -> str:
        """One commit: its message and its diff (optionally only for one path); secrets are left out."""
        rev = self._commitish(revision)
        return self._git(["show", "--no-ext-diff", "--no-textconv", "--end-of-options", rev], self._git_path(path))

    def git_diff(
        self,
        base: Annotated[str | None, Field(description="compare from this commit-ish (default HEAD)")] = None,
        target: Annotated[str | None, Field(description="compare to this commit-ish (default: the work tree)")] = None,
        path: Annotated[str | None, Field(description="only this file or directory")] = None,
        stat: Annotated[bool, Field(description="only a summary of changed files")] = False,
    ) -> str:
        """A diff between two commits, or between a commit (default HEAD) and the work tree; secrets left out."""
        if target is not None and base is None:
            raise ToolError("target needs a base: give base (and target) as commit-ish names")
        revs = [self._commitish(r) for r in (base or "HEAD", target) if r is not None]
        args = ["diff", "--no-ext-diff", "--no-textconv", *(["--stat"] if stat else []), "--end-of-options"]
        return self._git([*args, *revs], self._git_path(path))

    def git_blame(
        self,
        path: Annotated[str, Field(description="file path relative to the repository root")],
        start_line: Annotated[int | None, Field(description="first line, 1-based", ge=1)] = None,
        end_line: Annotated[int | None, Field(description="last line, inclusive", ge=1)] = None,
    ) -> str:
        """Who last changed each line of a file, and in which commit (optionally only a line range)."""
        real, rel = self._resolve(_no_option(path, "path"))
        if not real.is_file():
            raise ToolError(f"{rel!r} is not a file in the work tree: git_blame takes a file path")
        if end_line is not None and start_line is not None and end_line < start_line:
            raise ToolError(f"end_line {end_line} is before start_line {start_line}")
        span = [f"-L{start_line or 1},{end_line or ''}"] if start_line or end_line else []
        return self._git(["blame", "--date=short", *span], [rel])

    def tools(self) -> list[Callable[..., str]]:
        return [self.search, self.read_file, self.list_dir, self.git_log, self.git_show, self.git_diff, self.git_blame]


def _lines(f: Any) -> Iterator[str]:
    """Decoded lines without their newline; a very long line is cut so one line cannot fill memory."""
    while chunk := f.readline(MAX_LINE_CHARS * 4):
        line = chunk.decode(errors="replace").rstrip("\r\n")
        if not chunk.endswith(b"\n") and len(chunk) == MAX_LINE_CHARS * 4:
            while (more := f.readline(MAX_OUTPUT)) and not more.endswith(b"\n"):
                pass
            line += " …(line cut)"
        yield line


def _compile(query: str, literal: bool, ignore_case: bool) -> Any:
    """The query as an RE2 pattern (linear time: no pattern can stall a search), or a ToolError saying what to do."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.literal = literal
    options.log_errors = False
    try:
        return re2.compile(query, options)
    except re2.error as e:
        raise ToolError(
            f"invalid regex {query!r}: {e} (RE2 syntax: no backreferences or lookaround); "
            "pass literal=true to find the text as written"
        ) from e


def _glob_match(rel: str, glob: str) -> bool:
    if "/" not in glob:
        return fnmatch.fnmatch(rel.rsplit("/", 1)[-1], glob)
    return fnmatch.fnmatch(rel, glob) or (glob.startswith("**/") and fnmatch.fnmatch(rel, glob[3:]))


def _git_env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"}


def _tool(fn: Callable[..., str]) -> Callable[..., str]:
    """Turn an OS error into a tool error the model can read (anything else is the SDK's generic crash)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except OSError as e:
            raise ToolError(f"{fn.__name__} failed: {e.strerror or e}") from e

    return call


def build_server(
    root: str | Path | None = None,
    *,
    search_with: Literal["auto", "ripgrep", "python"] = "auto",
    include_ignored: bool | None = None,
    home: str | Path | None = None,
) -> MCPServer:
    """The ``codebase`` MCP server over ``root`` (default ``LABBOT_CODEBASE_ROOT``, else the current directory);
    ``home`` is labbot's (default ``LABBOT_HOME``), ``include_ignored`` serves files git ignores (default
    ``LABBOT_CODEBASE_INCLUDE_IGNORED``)."""
    code = Codebase(root, search_with=search_with, include_ignored=include_ignored, home=home)
    server: MCPServer = MCPServer(
        "labbot-codebase",
        instructions=f"Read-only search, file reading and git history of the repository at {code.root}. "
        "Paths are relative to that root; secrets, files git ignores and .git/ internals are withheld.",
    )
    for fn in code.tools():
        description = inspect.cleandoc(fn.__doc__ or "")
        server.add_tool(_tool(fn), description=description, annotations=READ, structured_output=False)
    return server
