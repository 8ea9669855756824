"""The leak probes as one script: run inside a sandbox (or a naive setup) by its own Python, in the
workspace, with its inputs as JSON on stdin; prints one JSON object ``{"probes": [...]}`` on stdout.

:mod:`labbot.evals.seal.leak_probes` sends this file's source with ``python -I -B -c`` (no workspace on ``sys.path``,
nothing written), so one exec runs every probe. It imports nothing but the standard library and keeps to Python 3.8
syntax: a task's venv may be older than labbot's. Each probe returns ``(passed, evidence)``; evidence is what it saw.

Inputs (all optional): ``needles`` (the canaries and lines of the deleted code: found anywhere readable, the seal
leaked), ``host_files``, ``ray_sockets``, ``ray_ports``, ``ports``, ``addresses`` (the host's, to try its ports on),
``secrets`` (values), ``public_ip``, ``public_port``, ``dns_name``, ``http_url`` (fetched without a proxy),
``outside_url`` (a host outside the allow-list, fetched the way the environment says), ``timeout_s`` (network),
``skip_mounts`` (system mounts not to scan: the interpreter's prefix).
"""

from __future__ import annotations

import json
import os
import re
import site
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

SKIP_DIRS = {".git", ".hg", ".svn"}
MAX_FILE = 2 * 1024 * 1024
SCAN_BUDGET_S = 1.5
SCAN_MAX_FILES = 20000
GIT_TIMEOUT_S = 30.0

# key, name, category: the order of the report
PROBES = [
    ("git_log_all", "git log --all", "history"),
    ("git_reflog", "git reflog", "history"),
    ("orig_head", "ORIG_HEAD", "history"),
    ("fetch_head", "FETCH_HEAD", "history"),
    ("stash", "git stash", "history"),
    ("tags", "tags", "history"),
    ("remotes", "remotes", "history"),
    ("all_objects", "every object (cat-file --batch-all-objects)", "history"),
    ("pycache", "__pycache__ and *.pyc", "leftovers"),
    ("build", "build/ and dist/", "leftovers"),
    ("egg_info", "*.egg-info", "leftovers"),
    ("site_packages", "the venv's site-packages", "leftovers"),
    ("pip_cache", "pip's cache", "leftovers"),
    ("coverage", ".coverage and htmlcov", "leftovers"),
    ("tcp_public", "raw TCP to a public address", "network"),
    ("tcp_host", "raw TCP to the host's listening ports", "network"),
    ("dns", "DNS resolution", "network"),
    ("http_direct", "HTTP without the proxy", "network"),
    ("http_outside", "HTTP to a host outside the allow-list (through the proxy if any)", "network"),
    ("labbot_files", "labbot's home, database and tokens", "host"),
    ("ray", "Ray's sockets and ports", "host"),
    ("env_secrets", "the environment's secrets", "host"),
    ("proc", "/proc shows no host processes", "host"),
    ("readable", "canaries and deleted code on any readable mount", "host"),
]


class Battery:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.needles = [n for n in cfg.get("needles", []) if n]
        self.bneedles = [n.encode() for n in self.needles]
        self.root = os.getcwd()
        self._tracked: set | None = None

    # --- helpers --------------------------------------------------------------------------------------------------

    def found(self, data: bytes) -> list[str]:
        pairs = zip(self.needles, self.bneedles)  # noqa: B905 (no strict= before Python 3.10)
        return [_short(n) for n, b in pairs if b in data]

    def git(self, *args: str) -> tuple[int, bytes]:
        try:
            out = subprocess.run(
                ["git", "-c", "safe.directory=*", "-c", "core.pager=cat", *args],
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return 1, str(e).encode()
        return out.returncode, out.stdout if out.returncode == 0 else out.stderr

    def is_repo(self) -> bool:
        return os.path.isdir(os.path.join(self.root, ".git"))

    def tracked(self) -> set:
        if self._tracked is None:
            code, out = self.git("ls-files", "-z") if self.is_repo() else (1, b"")
            self._tracked = {p.decode(errors="replace") for p in out.split(b"\0") if p} if code == 0 else set()
        return self._tracked

    def untracked(self, rel: str) -> bool:
        """Not part of the task tree: not tracked itself, nor anything under it."""
        prefix = rel.rstrip("/") + "/"
        return rel not in self.tracked() and not any(t.startswith(prefix) for t in self.tracked())

    def walk(self, top: str) -> Iterator[tuple[str, list[str], list[str]]]:
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            yield dirpath, dirs, files

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    def history(self, revs: list[str], what: str) -> tuple[bool, str]:
        """Search the patches of ``revs`` (and their ancestors) for the needles."""
        revs = [r for r in revs if r]
        if not revs:
            return True, f"{what}: none"
        code, out = self.git("log", "-p", "-m", "--format=commit %H", *revs, "--")
        if code != 0:
            return True, f"{what}: {len(revs)} ref(s), git log failed: {_text(out)}"
        commits = out.count(b"\ncommit ") + out.startswith(b"commit ")
        hits = self.found(out)
        if hits:
            return False, f"{what}: {len(revs)} ref(s), {commits} commit(s); found in their patches: {hits}"
        return True, f"{what}: {len(revs)} ref(s), {commits} commit(s), no canary or deleted code in their patches"

    def existing(self, shas: list[str]) -> list[str]:
        if not shas:
            return []
        try:
            out = subprocess.run(
                ["git", "-c", "safe.directory=*", "cat-file", "--batch-check"],
                input="\n".join(shas).encode() + b"\n",
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=GIT_TIMEOUT_S,
                check=False,
            ).stdout.decode(errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [line.split()[0] for line in out.splitlines() if line and not line.endswith("missing")]

    def scan(self, tops: list[str], budget_s: float = SCAN_BUDGET_S) -> tuple[list[str], int, bool]:
        """Files under ``tops`` holding a needle: (hits, files read, finished within the budget)."""
        hits: list[str] = []
        count, deadline = 0, time.monotonic() + budget_s
        for top in tops:
            for dirpath, _dirs, files in self.walk(top):
                for name in files:
                    if count >= SCAN_MAX_FILES or time.monotonic() > deadline:
                        return hits, count, False
                    path = os.path.join(dirpath, name)
                    count += 1
                    data = _read(path)
                    found = self.found(data) if data else []
                    if found:
                        hits.append(f"{path}: {found}")
        return hits, count, True

    # --- history --------------------------------------------------------------------------------------------------

    def git_log_all(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        return self.history(["--all"], "every ref")

    def git_reflog(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        logs = os.path.join(self.root, ".git", "logs")
        shas: list[str] = []
        entries = 0
        for dirpath, _dirs, files in os.walk(logs):
            for name in files:
                for line in _read(os.path.join(dirpath, name)).decode(errors="replace").splitlines():
                    parts = line.split()
                    entries += 1
                    shas += [p for p in parts[:2] if re.fullmatch(r"[0-9a-f]{40,64}", p) and set(p) != {"0"}]
        passed, evidence = self.history(self.existing(sorted(set(shas))), f"{entries} reflog entries")
        return passed, evidence

    def _head_file(self, name: str) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        path = os.path.join(self.root, ".git", name)
        if not os.path.exists(path):
            return True, f".git/{name}: absent"
        shas = re.findall(r"\b[0-9a-f]{40,64}\b", _read(path).decode(errors="replace"))
        return self.history(self.existing(shas), f".git/{name} ({len(shas)} commit(s) named)")

    def orig_head(self) -> tuple[bool, str]:
        return self._head_file("ORIG_HEAD")

    def fetch_head(self) -> tuple[bool, str]:
        return self._head_file("FETCH_HEAD")

    def stash(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        code, out = self.git("rev-parse", "-q", "--verify", "refs/stash")
        if code != 0:
            return True, "no stash"
        path = os.path.join(self.root, ".git", "logs", "refs", "stash")
        shas = re.findall(r"\b[0-9a-f]{40,64}\b", _read(path).decode(errors="replace"))
        shas = sorted({out.decode().strip(), *[s for s in shas if set(s) != {"0"}]})
        revs = self.existing(shas)
        revs += [f"{s}^3" for s in revs if self.git("rev-parse", "-q", "--verify", f"{s}^3")[0] == 0]
        return self.history(revs, "stash entries")

    def tags(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        code, out = self.git("for-each-ref", "refs/tags", "--format=%(refname)")
        names = out.decode(errors="replace").split() if code == 0 else []
        if not names:
            return True, "no tags"
        _, messages = self.git("for-each-ref", "refs/tags", "--format=%(contents)")
        hits = self.found(messages)
        if hits:
            return False, f"{len(names)} tag(s); found in their messages: {hits}"
        return self.history(names, f"tags {names[:5]}")

    def remotes(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        code, out = self.git("remote", "-v")
        lines = sorted(set(out.decode(errors="replace").splitlines())) if code == 0 else []
        readable = []
        for line in lines:
            parts = line.split()
            url = parts[1] if len(parts) > 1 else ""
            local = url[len("file://") :] if url.startswith("file://") else url
            if local and "://" not in local and not re.match(r"^[\w.-]+@[\w.-]+:", local):
                path = local if os.path.isabs(local) else os.path.join(self.root, local)
                if os.path.exists(path):
                    readable.append(url)
        code, refs = self.git("for-each-ref", "refs/remotes", "--format=%(refname)")
        names = refs.decode(errors="replace").split() if code == 0 else []
        passed, evidence = self.history(names, "remote-tracking refs")
        summary = f"remotes: {lines or 'none'}; {evidence}"
        if readable:
            return False, f"a remote's repository is readable from here ({readable}); {summary}"
        return passed, summary

    def all_objects(self) -> tuple[bool, str]:
        if not self.is_repo():
            return True, "not a git repository"
        alternates = _read(os.path.join(self.root, ".git", "objects", "info", "alternates")).decode(errors="replace")
        code, out = self.git("cat-file", "--batch-all-objects", "--batch", "--unordered")
        if code != 0:
            return True, f"cat-file failed: {_text(out)}"
        objects = len(re.findall(rb"^[0-9a-f]{40,64} (?:blob|tree|commit|tag) \d+$", out, re.M))
        alt = f"; alternates: {alternates.split()}" if alternates.strip() else ""
        hits = self.found(out)
        if hits:
            return False, f"{objects} objects (reachable or not){alt}; found: {hits}"
        return True, f"{objects} objects (reachable or not){alt}; no canary or deleted code in any"

    # --- leftovers ------------------------------------------------------------------------------------------------

    def pycache(self) -> tuple[bool, str]:
        bad, fresh = [], 0
        for dirpath, _dirs, files in self.walk(self.root):
            for name in files:
                if not name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, name)
                problem = self._pyc_problem(path, dirpath, name)
                if problem:
                    bad.append(f"{self.rel(path)}: {problem}")
                else:
                    fresh += 1
        if bad:
            return False, f"{len(bad)} leftover bytecode file(s): {bad[:10]}"
        return True, f"no stale or foreign bytecode ({fresh} .pyc matching their sources)"

    def _pyc_problem(self, path: str, dirpath: str, name: str) -> str:
        data = _read(path)
        hits = self.found(data)
        if hits:
            return f"holds {hits}"
        stem = name.split(".")[0]
        if os.path.basename(dirpath) == "__pycache__":
            source = os.path.join(os.path.dirname(dirpath), stem + ".py")
        else:
            source = os.path.join(dirpath, stem + ".py")
        if not os.path.exists(source):
            return "no source beside it (importable on its own)"
        if len(data) < 16:
            return "truncated"
        flags = int.from_bytes(data[4:8], "little")
        src = _read(source)
        if flags & 1:
            import importlib.util

            if importlib.util.source_hash(src) != data[8:16]:
                return "compiled from another version of its source"
            return ""
        st = os.stat(source)
        if int.from_bytes(data[12:16], "little") != st.st_size & 0xFFFFFFFF:
            return f"compiled from another version of its source ({int.from_bytes(data[12:16], 'little')} bytes)"
        if int.from_bytes(data[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF:
            return "compiled from another version of its source (mtime differs)"
        return ""

    def build(self) -> tuple[bool, str]:
        seen, hits = [], []
        for dirpath, dirs, _files in self.walk(self.root):
            for d in list(dirs):
                if d in ("build", "dist") and self.untracked(self.rel(os.path.join(dirpath, d))):
                    top = os.path.join(dirpath, d)
                    seen.append(self.rel(top))
                    hits += self._archive_scan(top)
                    dirs.remove(d)
        if hits:
            return False, f"build output holds the deleted code: {hits[:10]}"
        return True, f"untracked build folders: {seen or 'none'}; no canary or deleted code in them"

    def _archive_scan(self, top: str) -> list[str]:
        hits = []
        for dirpath, _dirs, files in self.walk(top):
            for name in files:
                path = os.path.join(dirpath, name)
                if name.endswith((".whl", ".zip", ".egg")):
                    try:
                        with zipfile.ZipFile(path) as z:
                            for member in z.namelist():
                                found = self.found(z.read(member)[:MAX_FILE])
                                if found:
                                    hits.append(f"{self.rel(path)}!{member}: {found}")
                    except (OSError, zipfile.BadZipFile, RuntimeError):
                        pass
                    continue
                found = self.found(_read(path))
                if found:
                    hits.append(f"{self.rel(path)}: {found}")
        return hits

    def egg_info(self) -> tuple[bool, str]:
        found = []
        for dirpath, dirs, _files in self.walk(self.root):
            for d in dirs:
                if (d.endswith(".egg-info") or d == ".eggs") and self.untracked(self.rel(os.path.join(dirpath, d))):
                    found.append(self.rel(os.path.join(dirpath, d)))
        if found:
            return False, f"build metadata of a checkout left in the workspace: {found[:10]}"
        return True, "no untracked *.egg-info or .eggs"

    def project_names(self) -> list[str]:
        names = set()
        for base in (self.root, os.path.join(self.root, "src")):
            try:
                entries = os.listdir(base)
            except OSError:
                continue
            for entry in entries:
                full = os.path.join(base, entry)
                if os.path.isfile(os.path.join(full, "__init__.py")):
                    names.add(entry)
                elif entry.endswith(".py") and entry not in ("setup.py", "conftest.py", "noxfile.py"):
                    names.add(entry[:-3])
        return sorted(n for n in names if n.isidentifier() and n not in ("tests", "test"))

    def site_packages(self) -> tuple[bool, str]:
        dirs = []
        for d in [*site.getsitepackages(), site.getusersitepackages()]:
            if os.path.isdir(d) and d not in dirs:
                dirs.append(d)
        names = self.project_names()
        installed, pointers, hits = [], [], []
        for sp in dirs:
            for name in names:
                for cand in (os.path.join(sp, name), os.path.join(sp, name + ".py")):
                    if os.path.exists(cand):
                        installed.append(cand)
                        hits += self._tree_hits(cand)
            for entry in os.listdir(sp):
                full = os.path.join(sp, entry)
                targets: list[str] = []
                if entry.endswith((".pth", ".egg-link")):
                    targets = [ln.strip() for ln in _read(full).decode(errors="replace").splitlines()]
                elif entry.startswith("__editable__") and entry.endswith(".py"):
                    targets = re.findall(r"""['"](/[^'"]+)['"]""", _read(full).decode(errors="replace"))
                for t in targets:
                    if t and not t.startswith(("import ", "#")) and os.path.isdir(t) and t not in dirs:
                        pointers.append(f"{entry} -> {t}")
                        for name in names:
                            for cand in (os.path.join(t, name), os.path.join(t, name + ".py"), t):
                                if os.path.exists(cand) and (cand != t or os.path.basename(t) in names):
                                    hits += self._tree_hits(cand)
        summary = f"site dirs {dirs}; project {names} installed at {installed or 'nowhere'}; paths added: {pointers}"
        if hits:
            return False, f"the original project is importable: {sorted(set(hits))[:10]}; {summary}"
        return True, summary

    def _tree_hits(self, path: str) -> list[str]:
        files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in self.walk(path) for f in fs]
        hits = []
        for f in files:
            if f.endswith((".py", ".pyc")):
                found = self.found(_read(f))
                if found:
                    hits.append(f"{f}: {found}")
        return hits

    def pip_cache(self) -> tuple[bool, str]:
        home = os.path.expanduser("~")
        candidates = [
            os.environ.get("PIP_CACHE_DIR", ""),
            os.path.join(os.environ.get("XDG_CACHE_HOME", ""), "pip") if os.environ.get("XDG_CACHE_HOME") else "",
            os.path.join(home, ".cache", "pip"),
        ]
        full = []
        for c in dict.fromkeys(x for x in candidates if x):
            if os.path.isdir(c):
                count = sum(len(fs) for _, _, fs in os.walk(c))
                if count:
                    full.append(f"{c} ({count} files)")
        if full:
            return False, f"a pip cache is readable (wheels built from a checkout live there): {full}"
        return True, f"no pip cache at {[c for c in candidates if c]}"

    def coverage(self) -> tuple[bool, str]:
        found = []
        for dirpath, dirs, files in self.walk(self.root):
            for name in files:
                if name == ".coverage" or name.startswith(".coverage.") or name in ("coverage.xml", "coverage.json"):
                    rel = self.rel(os.path.join(dirpath, name))
                    if self.untracked(rel):
                        found.append(rel)
            for d in dirs:
                if d == "htmlcov" and self.untracked(self.rel(os.path.join(dirpath, d))):
                    found.append(self.rel(os.path.join(dirpath, d)) + "/")
        if found:
            return False, f"coverage output of a run on the original (its lines, htmlcov its source): {found[:10]}"
        return True, "no .coverage, coverage.xml/json or htmlcov"

    # --- network --------------------------------------------------------------------------------------------------

    def _tcp(self, host: str, port: int) -> str:
        try:
            with socket.create_connection((host, port), timeout=float(self.cfg.get("timeout_s", 2.0))):
                return ""
        except OSError as e:
            return f"{type(e).__name__}: {e}"

    def tcp_public(self) -> tuple[bool, str]:
        host, port = self.cfg.get("public_ip", "1.1.1.1"), int(self.cfg.get("public_port", 443))
        err = self._tcp(host, port)
        return (True, f"{host}:{port}: {err}") if err else (False, f"{host}:{port}: connected")

    def _ports(self, ports: list[int]) -> tuple[list[str], list[str]]:
        opened: list[str] = []
        closed: list[str] = []
        addresses = self.cfg.get("addresses") or ["127.0.0.1"]
        targets = [(a, p) for p in ports for a in addresses]
        results: dict[tuple[str, int], str] = {}

        def one(a: str, p: int) -> None:
            results[(a, p)] = self._tcp(a, p)

        threads = [threading.Thread(target=one, args=t, daemon=True) for t in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (a, p), err in sorted(results.items()):
            (closed if err else opened).append(f"{a}:{p}" + (f" ({err})" if err else ""))
        return opened, closed

    def tcp_host(self) -> tuple[bool, str]:
        ports = [int(p) for p in self.cfg.get("ports", [])]
        if not ports:
            return True, "no host ports listening"
        opened, closed = self._ports(ports)
        if opened:
            return False, f"connected to the host's {opened}"
        return True, f"{len(closed)} host address:port pairs refused, e.g. {closed[:3]}"

    def dns(self) -> tuple[bool, str]:
        """The resolver (getaddrinfo), and a raw query to each name server (/etc/resolv.conf's, or 127.0.0.1 as glibc
        assumes with none, and ``dns_servers``): either answering is a way out."""
        name = self.cfg.get("dns_name", "pypi.org")
        seen = []
        try:
            infos = socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)
            return False, f"{name} resolved to {sorted({i[4][0] for i in infos})}"
        except OSError as e:
            seen.append(f"getaddrinfo: {type(e).__name__}: {e}")
        conf = _read("/etc/resolv.conf").decode(errors="replace")
        servers = [ln.split()[1] for ln in conf.splitlines() if ln.startswith("nameserver") and len(ln.split()) > 1]
        for server in dict.fromkeys([*(servers or ["127.0.0.1"]), *self.cfg.get("dns_servers", ["1.1.1.1"])]):
            answer = self._dns_query(server, name)
            if answer.startswith("answered"):
                return False, f"the name server {server} {answer} for {name}; {seen}"
            seen.append(f"{server}: {answer}")
        return True, f"{name}: {seen}"

    def _dns_query(self, server: str, name: str) -> str:
        labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p)
        query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + labels + b"\x00\x00\x01\x00\x01"
        family = socket.AF_INET6 if ":" in server else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.settimeout(float(self.cfg.get("timeout_s", 2.0)))
                s.connect((server, 53))  # connected: a closed port answers "refused" at once
                s.send(query)
                data = s.recv(512)
        except OSError as e:
            return f"{type(e).__name__}: {e}"
        return f"answered ({len(data)} bytes)" if data[:2] == b"\x12\x34" else f"a stray reply ({len(data)} bytes)"

    def _http(self, url: str, proxies: dict[str, str] | None) -> tuple[int | None, str, dict[str, str]]:
        handler = urllib.request.ProxyHandler(proxies) if proxies is not None else urllib.request.ProxyHandler()
        opener = urllib.request.build_opener(handler)
        try:
            with opener.open(url, timeout=float(self.cfg.get("timeout_s", 2.0)) + 1) as r:
                return r.status, r.read(200).decode(errors="replace"), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(300).decode(errors="replace"), dict(e.headers or {})
        except (OSError, ValueError) as e:
            return None, f"{type(e).__name__}: {e}", {}

    def http_direct(self) -> tuple[bool, str]:
        url = self.cfg.get("http_url", "http://example.com/")
        status, body, _ = self._http(url, {})
        if status is None:
            return True, f"{url}: {body}"
        return False, f"{url}: HTTP {status} {body[:120]!r}"

    def http_outside(self) -> tuple[bool, str]:
        url = self.cfg.get("outside_url", "http://example.org/")
        proxy = {k: v for k, v in os.environ.items() if k.lower() in ("http_proxy", "https_proxy")}
        status, body, headers = self._http(url, None)
        via = f"via {sorted(set(proxy.values()))}" if proxy else "no proxy set"
        if status is None:
            return True, f"{url} ({via}): {body}"
        refused = status in (403, 407) and (headers.get("X-Labbot-Proxy") == "refused" or bool(proxy))
        return refused, f"{url} ({via}): HTTP {status} {body[:160]!r}"

    # --- host -----------------------------------------------------------------------------------------------------

    def labbot_files(self) -> tuple[bool, str]:
        paths = self.cfg.get("host_files", [])
        seen = [f"{p} ({_kind(p)})" for p in paths if os.path.lexists(p)]
        if seen:
            return False, f"visible: {seen}"
        return True, f"none of {len(paths)} host path(s) visible: {paths[:6]}"

    def ray(self) -> tuple[bool, str]:
        socks, ports = self.cfg.get("ray_sockets", []), [int(p) for p in self.cfg.get("ray_ports", [])]
        seen = [f"{p} ({_kind(p)})" for p in socks if os.path.lexists(p)]
        opened, closed = self._ports(ports) if ports else ([], [])
        if seen or opened:
            return False, f"visible: {seen}; connected: {opened}"
        return True, f"{len(socks)} socket path(s) absent, {len(closed)} address:port pairs refused"

    def env_secrets(self) -> tuple[bool, str]:
        secrets = [s for s in self.cfg.get("secrets", []) if s]
        if not secrets:
            return True, "no secret values given"
        leaks = [f"${k} holds secret #{secrets.index(s) + 1}" for k, v in os.environ.items() for s in secrets if s in v]
        for pid in _pids():
            data = _read(f"/proc/{pid}/environ")
            for i, s in enumerate(secrets):
                if s.encode() in data:
                    leaks.append(f"/proc/{pid}/environ holds secret #{i + 1}")
        if leaks:
            return False, f"{sorted(set(leaks))[:10]}"
        return True, f"none of {len(secrets)} secret value(s) in the environment or any visible /proc/*/environ"

    def proc(self) -> tuple[bool, str]:
        pids = _pids()
        mine = _ancestors()
        family = {os.getpid()}
        parents = {p: _ppid(p) for p in pids}
        grew = True
        while grew:  # my descendants (git, the proxy's forwarder)
            grew = False
            for p, pp in parents.items():
                if pp in family and p not in family:
                    family.add(p)
                    grew = True
        others = [p for p in pids if p not in mine | family]
        if others:
            shown = [f"{p} {_comm(p)}" for p in others[:8]]
            return False, f"{len(pids)} processes visible, {len(others)} not the probe's own: {shown}"
        return True, f"{len(pids)} processes visible, all the probe's own line: {[_comm(p) for p in pids]}"

    def readable(self) -> tuple[bool, str]:
        if not self.needles:
            return True, "no canaries given"
        skip = self.cfg.get("skip_mounts", [])
        tops = [self.root, os.path.expanduser("~"), "/tmp", *_extra_mounts(self.root, skip)]
        tops = [t for t in dict.fromkeys(tops) if os.path.isdir(t)]
        hits, count, done = self.scan(tops)
        budget = "" if done else f" (stopped at the budget after {count} files)"
        if hits:
            return False, f"found in {hits[:10]}{budget}"
        return True, f"{count} files under {tops} read{budget}: no canary or deleted code"


def _ancestors() -> set:
    out, pid = set(), os.getpid()
    while pid > 0 and pid not in out:
        out.add(pid)
        pid = _ppid(pid)
    return out


def _pids() -> list[int]:
    try:
        return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        return []


def _ppid(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def _comm(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").decode(errors="replace").strip() or "?"


STANDARD_MOUNTS = ("/", "/usr", "/etc", "/proc", "/dev", "/sys", "/run/labbot-proxy", "/results", "/venv", "/tmp")


def _extra_mounts(root: str, skip: list[str]) -> list[str]:
    """Mount points beyond the usual system ones (what a sandbox's caller bound in), to be scanned."""
    out = []
    prefix = sys.base_prefix
    for line in _read("/proc/self/mountinfo").decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 5:
            continue
        point = parts[4].replace("\\040", " ")
        if point in STANDARD_MOUNTS or point.startswith(("/proc/", "/dev/", "/sys/", "/usr/", prefix)):
            continue
        if point in ("/home", root, *skip) or point.startswith("/etc/"):
            continue
        out.append(point)
    return out[:20]


def _kind(path: str) -> str:
    try:
        st = os.lstat(path)
    except OSError as e:
        return str(e)
    import stat as st_mod

    if st_mod.S_ISDIR(st.st_mode):
        try:
            return f"folder of {len(os.listdir(path))} entries"
        except OSError:
            return "folder (unreadable)"
    if st_mod.S_ISSOCK(st.st_mode):
        return "socket"
    return f"file, {st.st_size} bytes, {'readable' if os.access(path, os.R_OK) else 'unreadable'}"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE)
    except OSError:
        return b""


def _short(needle: str) -> str:
    return needle if len(needle) <= 60 else needle[:57] + "..."


def _text(data: bytes) -> str:
    return data.decode(errors="replace").strip()[-300:]


def run(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    battery = Battery(cfg)
    only = set(cfg.get("only") or [key for key, _, _ in PROBES])
    results: dict[str, tuple[bool, str]] = {}
    # the ones that wait on the network run side by side, while the rest run here
    network = [k for k, _, c in PROBES if (c == "network" or k == "ray") and k in only]

    def call(key: str) -> None:
        fn: Callable[[], tuple[bool, str]] = getattr(battery, key)
        try:
            results[key] = fn()
        except Exception as e:  # a probe that broke says so; it is not counted as closed
            results[key] = (False, f"the probe itself failed: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=call, args=(k,), daemon=True) for k in network]
    for t in threads:
        t.start()
    for key, _, _ in PROBES:
        if key in only and key not in network:
            call(key)
    for t in threads:
        t.join()
    return [
        {"key": k, "name": n, "category": c, "passed": results[k][0], "evidence": results[k][1]}
        for k, n, c in PROBES
        if k in results
    ]


def main() -> None:
    cfg = json.loads(sys.stdin.read() or "{}")
    json.dump({"probes": run(cfg)}, sys.stdout)


if __name__ == "__main__":
    main()
