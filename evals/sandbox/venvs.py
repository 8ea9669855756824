"""The task's venv: the repository's dependencies, pytest and coverage, built offline inside a sandbox from wheels.

Two steps, on two sides of the seal:

1. On the host, :func:`collect_wheels` puts wheels of what the repository declares (read statically, see
   :func:`requirements`: no code of the repository runs outside a sandbox) plus pytest and coverage into the
   suite's ``wheels/`` with ``pip wheel`` (the host's network and pip cache are fine here; a local wheel folder is
   tried first, offline, so a second suite of the same project needs no network). The project's own wheel is never
   built: it would carry the original code into every sandbox. The project is imported from the workspace instead
   (``/workspace``, or ``/workspace/src`` for ``src`` layouts: ``Suite.test_roots``).
2. :func:`ensure_venv` builds the venv *inside* a sandbox from those wheels — ``python -m venv`` with the host's base
   interpreter (its prefix is bound read-only there), then ``pip install --no-index --find-links /wheels`` with pip's
   cache off and regular (non-editable) installs — bound read-write at ``/venv`` so its scripts name the path every
   sample binds it at (read-only). It is cached on the host under a hash of the interpreter version and the wheel set,
   so every sample and every suite with the same wheels reuses one venv.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from labbot.common.errors import BadRequest
from labbot.common.python_ast import parse_python
from labbot.evals.sandbox.bwrap import VENV, Limits, Sandbox, SandboxSpec
from labbot.evals.suite import TOOLCHAIN_IMPORTS

TEST_GROUPS = ("test", "tests", "testing")
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-test.txt",
    "requirements-tests.txt",
    "requirements_test.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "tests/requirements.txt",
)
TOOLS = ("pytest", "coverage")  # what every task venv needs, at the host's versions unless the project says otherwise
MARKER = ".labbot-venv.json"
BUILD_LIMITS = Limits(timeout_s=900.0, memory_mb=4096, file_mb=1024)
PIP_TIMEOUT_S = 900.0
Progress = Callable[[str], None]
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[([^\]]*)\])?\s*(.*)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse_requirement(text: str) -> tuple[str, list[str]] | None:
    """The distribution name and extras of a PEP 508 requirement (pip checks the rest), None when it has none."""
    match = _REQUIREMENT.match(text)
    if match is None or (match.group(3) and match.group(3)[0] not in "<>=!~(;@"):
        return None
    extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
    return match.group(1), extras


def _quiet(_: str) -> None:
    return None


def _project_name(tree: Path) -> str | None:
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file():
        try:
            name = tomllib.loads(pyproject.read_text()).get("project", {}).get("name")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            name = None
        if isinstance(name, str):
            return name
    cfg = _setup_cfg(tree)
    if cfg is not None and cfg.has_option("metadata", "name"):
        return cfg.get("metadata", "name").strip()
    setup = _setup_py_keywords(tree)
    name = setup.get("name")
    return name if isinstance(name, str) else None


def _setup_cfg(tree: Path) -> configparser.ConfigParser | None:
    path = tree / "setup.cfg"
    if not path.is_file():
        return None
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(path.read_text())
    except (configparser.Error, UnicodeDecodeError):
        return None
    return cfg


def _setup_py_keywords(tree: Path) -> dict[str, object]:
    """The literal keyword arguments of ``setup(...)`` in setup.py, read with ``ast`` (never run)."""
    path = tree / "setup.py"
    if not path.is_file():
        return {}
    try:
        module = parse_python(path.read_text())
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "setup":
                out: dict[str, object] = {}
                for kw in node.keywords:
                    if kw.arg is None:
                        continue
                    try:
                        out[kw.arg] = ast.literal_eval(kw.value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        continue
                return out
    return {}


def _lines_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _requirement_file(path: Path, tree: Path, seen: set[Path]) -> list[str]:
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        line = re.split(r"(^|\s)#", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        include = re.match(r"^(-r|--requirement)\s*(\S+)$", line)
        if include:
            target = (path.parent / include.group(2)).resolve()
            if tree.resolve() in target.parents:
                out += _requirement_file(target, tree, seen)
            continue
        if line.startswith(("-", ".", "/")):
            continue  # options, editable and local paths (the project itself): not third-party packages
        out.append(line)
    return out


def _pyproject(tree: Path) -> tuple[list[str], dict[str, list[str]]]:
    path = tree / "pyproject.toml"
    if not path.is_file():
        return [], {}
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return [], {}
    project = doc.get("project", {})
    deps = _lines_of(project.get("dependencies", []))
    extras = {k: _lines_of(v) for k, v in project.get("optional-dependencies", {}).items()}
    groups = doc.get("dependency-groups", {})

    def group(name: str, depth: int = 0) -> list[str]:
        out: list[str] = []
        for item in groups.get(name, []) if depth < 10 else []:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
                out += group(item["include-group"], depth + 1)
        return out

    for name in TEST_GROUPS:
        if name in groups:
            extras.setdefault(name, []).extend(group(name))
    return deps, extras


def requirements(tree: Path, progress: Progress = _quiet) -> list[str]:
    """What the repository at ``tree`` declares it needs to run its tests, read statically: ``[project]``
    dependencies and its ``test``/``tests``/``testing`` extras and dependency groups (pyproject.toml),
    ``install_requires``/``tests_require`` and those extras (setup.cfg, or literal arguments of ``setup()`` in
    setup.py), and the usual requirements files; the project itself and local paths are left out."""
    own = _project_name(tree)
    deps, extras = _pyproject(tree)
    cfg = _setup_cfg(tree)
    if cfg is not None:
        for option in ("install_requires", "tests_require"):
            if cfg.has_option("options", option):
                deps += _lines_of(cfg.get("options", option))
        if cfg.has_section("options.extras_require"):
            for key, value in cfg.items("options.extras_require"):
                extras.setdefault(key, []).extend(_lines_of(value))
    setup = _setup_py_keywords(tree)
    deps += _lines_of(setup.get("install_requires")) + _lines_of(setup.get("tests_require"))
    setup_extras = setup.get("extras_require")
    if isinstance(setup_extras, dict):
        for key, value in setup_extras.items():
            if isinstance(key, str):
                extras.setdefault(key, []).extend(_lines_of(value))
    seen: set[Path] = set()
    for name in REQUIREMENT_FILES:
        deps += _requirement_file(tree / name, tree, seen)
    wanted = list(TEST_GROUPS)
    out: list[str] = []
    pending = deps + [r for g in TEST_GROUPS for r in extras.get(g, [])]
    while pending:
        text = pending.pop(0)
        parsed = _parse_requirement(text)
        if parsed is None:
            progress(f"skipped a requirement that does not parse: {text!r}")
            continue
        name, own_extras = parsed
        if own is not None and _canonical(name) == _canonical(own):
            for extra in own_extras:  # ``project[test]`` names its own extras
                if extra not in wanted:
                    wanted.append(extra)
                    pending += extras.get(extra, [])
            continue
        if text.strip() not in out:
            out.append(text.strip())
    return out


def toolchain_needed(tree: Path) -> list[str]:
    """The vendored trees of the venv's toolchain that the repository's code or tests import (``setuptools``,
    ``pkg_resources``: they load their ``_vendor`` copies at import), which its sandboxes must then show; every other
    vendored tree stays hidden (:func:`labbot.evals.sandbox.bwrap.venv_masks`)."""
    found: set[str] = set()
    for path in sorted(tree.rglob("*.py")):
        if ".git" in path.relative_to(tree).parts or path.is_symlink() or not path.is_file():
            continue
        try:
            parsed = parse_python(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(parsed):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".", 1)[0]
                if top in TOOLCHAIN_IMPORTS:
                    found.add(top)
    # pkg_resources itself imports setuptools' vendored packages
    trees = {TOOLCHAIN_IMPORTS[t] for t in found} | ({TOOLCHAIN_IMPORTS["setuptools"]} if found else set())
    return sorted(trees)


def with_tools(reqs: Iterable[str]) -> list[str]:
    """``reqs`` plus pytest and coverage at the versions running here, unless the project already names them."""
    out = list(reqs)
    named = {_canonical(p[0]) for p in map(_parse_requirement, out) if p is not None}
    for tool in TOOLS:
        if tool not in named:
            out.append(f"{tool}=={importlib.metadata.version(tool)}")
    return out


_MISSING = re.compile(r"No matching distribution found for (\S+)")  # pip's line naming what no index has


def _pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_NO_INDEX", None)
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env
    )


def collect_wheels(
    reqs: Sequence[str], wheels: Path, *, cache: Path | None = None, progress: Progress = _quiet
) -> list[Path]:
    """Wheels of ``reqs`` and everything they depend on, in ``wheels`` (made if missing).

    With ``cache`` (a folder of wheels kept between suites), pip first tries it alone, offline; only what is not
    there is fetched from the index, and then kept there."""
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labbot-reqs-") as tmp:
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text("".join(r + "\n" for r in reqs))
        base = ["wheel", "--quiet", "--wheel-dir", str(wheels), "--requirement", str(req_file)]
        done = None
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
            done = _pip([*base, "--no-index", "--find-links", str(cache)])
            if done.returncode == 0:
                progress(f"wheels: {len(reqs)} requirements from the local wheel cache")
        if done is None or done.returncode != 0:
            progress(f"wheels: fetching {len(reqs)} requirements with pip ({', '.join(reqs)})")
            done = _pip([*base, *(["--find-links", str(cache)] if cache is not None else [])])
            if done.returncode != 0:
                said = done.stderr or done.stdout
                missing = _MISSING.findall(said)
                what = f"no distribution of {', '.join(missing)} on the package index" if missing else "pip failed"
                raise BadRequest(  # its last line is what a run's failure shows (training.failure_reason)
                    f"could not get wheels for the repository's requirements ({', '.join(reqs)}): pip said:\n"
                    f"{said[-2000:]}\n{what}: check that they exist on the package index (and that the index is "
                    "reachable from this host)"
                )
            if cache is not None:
                for whl in wheels.glob("*.whl"):
                    if not (cache / whl.name).exists():
                        shutil.copy2(whl, cache / whl.name)
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise BadRequest(f"pip left no wheels in {wheels} for {', '.join(reqs)}")
    return found


def wheel_set_hash(wheels: Path) -> str:
    """The venv's cache key: the interpreter's version and every wheel's name and content."""
    digest = hashlib.sha256(f"python {sys.version_info[:3]}\n".encode())
    for whl in sorted(wheels.glob("*.whl")):
        digest.update(f"{whl.name} {hashlib.sha256(whl.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()[:16]


def base_python() -> Path:
    """The interpreter venvs are made with: the base of the one running here (not a venv's link to it)."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(sys.base_prefix) / "bin" / name, Path(sys.base_prefix) / "bin" / "python3"):
        if candidate.exists():
            return candidate
    raise BadRequest(f"no {name} under {sys.base_prefix}/bin: task venvs are made with the host's base interpreter")


def ensure_venv(wheels: Path, cache_root: Path, *, progress: Progress = _quiet) -> Path:
    """The venv of ``wheels`` (every one installed), built in a sandbox on first use and reused afterwards.

    The folder returned is meant to be bound read-only at ``/venv`` (``SandboxSpec.venv``)."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise BadRequest(f"{wheels} holds no wheels: collect them first (evals.sandbox.venvs.collect_wheels)")
    key = wheel_set_hash(wheels)
    final = cache_root / f"venv-{key}"
    if (final / MARKER).is_file():
        return final
    cache_root.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=cache_root))
    progress(f"venv: building from {len(found)} wheels in a sandbox")
    try:
        with tempfile.TemporaryDirectory(prefix="labbot-venv-work-") as work:
            spec = SandboxSpec(
                workspace=Path(work),
                ro_binds={"/wheels": wheels},
                rw_binds={VENV: build},
                limits=BUILD_LIMITS,
                vendored=True,  # python -m venv runs ensurepip, and pip its vendored libraries
            )
            with Sandbox(spec) as box:
                made = box.exec([str(base_python()), "-m", "venv", VENV])
                if not made.success:
                    raise BadRequest(f"python -m venv failed in the sandbox:\n{(made.stderr or made.stdout)[-2000:]}")
                installed = box.exec(
                    [
                        f"{VENV}/bin/python",
                        "-m",
                        "pip",
                        "install",
                        "--no-index",
                        "--no-cache-dir",
                        "--only-binary",
                        ":all:",
                        "--find-links",
                        "/wheels",
                        "--quiet",
                        *(f"/wheels/{w.name}" for w in found),
                    ]
                )
                if not installed.success:
                    tail = (installed.stderr or installed.stdout)[-2000:]
                    raise BadRequest(f"installing the task's wheels failed in the sandbox (offline):\n{tail}")
        (build / MARKER).write_text(json.dumps({"wheels": [w.name for w in found], "key": key}, indent=2) + "\n")
        try:
            build.rename(final)
        except OSError:
            if not (final / MARKER).is_file():
                raise
            # another process finished the same venv first: use theirs
    finally:
        if build.exists():
            shutil.rmtree(build, ignore_errors=True)
    return final
