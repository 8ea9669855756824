"""Wheels built from a copy of the source tree, and fresh virtual environments they are installed into, offline.

A fresh venv gets its third-party packages from the environment running the tests through a ``.pth`` file that
names folders: a path line in a ``.pth`` adds that folder to ``sys.path`` without processing the ``.pth`` files in
it, so the editable install of this checkout (``__editable__.labbot-*.pth`` in the dev venv) stays invisible and
``import labbot`` can only find what was installed from the wheel. Nothing is downloaded: pip runs with
``--no-index --no-deps``.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
#: What the build needs of the repository (tests, benchmarks and the dev venv stay behind).
LAYERS = tuple(sorted(p.name for p in (ROOT / "labbot").iterdir() if p.is_symlink()))
SOURCES = ("pyproject.toml", "README.md", "labbot", *LAYERS)
CLIENT = "client"
_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info", ".mypy_cache")


def build_wheels(dest: Path) -> dict[str, Path]:
    """``labbot`` and ``labbot-client`` wheels, built (no isolation, no index) from a copy of the tree in ``dest``.

    The copy keeps ``labbot/``'s relative symlinks as symlinks, and keeps the checkout free of build/ and
    egg-info (a stale build/lib would put deleted modules back into later wheels)."""
    src = dest / "src"
    src.mkdir(parents=True)
    for name in (*SOURCES, CLIENT):
        path = ROOT / name
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, src / name, symlinks=True, ignore=_JUNK)
        else:
            shutil.copy2(path, src / name)
    out = dest / "wheels"
    for project in (src, src / CLIENT):
        pip(
            "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet", "--wheel-dir", str(out), str(project)
        )
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(found) == {"labbot", "labbot_client"}, sorted(out.iterdir())
    return found


def pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


class Venv:
    """A fresh venv (no pip of its own) with the given wheels installed, not editable. ``visible``: folders added to
    its ``sys.path`` (after its own site-packages); ``blocked``: modules made unimportable in it, from startup."""

    def __init__(self, path: Path, wheels: list[Path], *, visible: list[Path], blocked: tuple[str, ...] = ()) -> None:
        self.path = path
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
        self.python = path / "bin" / "python"
        self.site = Path(
            subprocess.check_output(
                [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
            ).strip()
        )
        pip("--python", str(self.python), "install", "--no-deps", "--no-index", "--quiet", *map(str, wheels))
        (self.site / "_labbot_test_visible.pth").write_text("".join(f"{p}\n" for p in visible))
        if blocked:  # an import line of a .pth runs at startup: `import torch` raises ImportError from then on
            (self.site / "_labbot_test_blocked.pth").write_text(
                f"import sys; sys.modules.update(dict.fromkeys({blocked!r}))\n"
            )

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def env(self, **extra: str) -> dict[str, str]:
        """This machine's environment without anything that would point Python at the checkout or a service."""
        drop = ("PYTHON", "VIRTUAL_ENV", "LABBOT_", "RAY_", "SLACK_", "ANTHROPIC_", "NOTION_", "LINEAR_", "DD_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update(PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1", PATH=f"{self.path / 'bin'}{os.pathsep}{env['PATH']}")
        env.update(extra)
        return env

    def run(
        self,
        *args: str | Path,
        cwd: Path,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=env or self.env(),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def dev_site_packages() -> Path:
    """The site-packages of the environment running the tests (third-party packages, and the editable finders)."""
    return Path(sysconfig.get_paths()["purelib"])


def link_distributions(dest: Path, roots: list[str]) -> set[str]:
    """Symlink ``roots`` and their dependencies (no extras), as installed here, into ``dest``: their modules and
    dist-info folders. Returns the distribution names linked."""
    dest.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        name = str(dist.metadata["Name"]).lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        base = Path(str(dist.locate_file("")))
        tops = {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] not in ("..", "__pycache__")}
        for top in tops:
            if not (dest / top).exists() and (base / top).exists():
                (dest / top).symlink_to(base / top)
    return seen


def wheel_entries(wheel: Path) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as z:
        return z.infolist()
