"""``scripts/system-packages.sh``: what is missing is installed as root, else the command to run is printed; a
missing package only warns with ``--warn-unless-ci`` (make run, make test), and fails under CI=true."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-packages.sh"


def _run(tmp_path: Path, *args: str, ci: bool = False, have: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """The script with a PATH of its own: the tools it needs, ``have`` (stand-ins for rg, bwrap), and an ``id``
    that says it is not root (so nothing is installed on this machine)."""
    bin_dir = tmp_path / f"bin-{len(list(tmp_path.glob('bin-*')))}"
    bin_dir.mkdir()
    for tool in ("bash", "cat"):
        (bin_dir / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip())
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    for name in have:
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for tool in ("id", *have):
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": str(bin_dir), **({"CI": "true"} if ci else {})}
    return subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_nothing_to_do_when_both_are_there(tmp_path: Path) -> None:
    done = _run(tmp_path, have=("rg", "bwrap"))
    assert done.returncode == 0 and done.stdout == done.stderr == ""


def test_missing_packages_name_the_command_and_warn_or_fail(tmp_path: Path) -> None:
    strict = _run(tmp_path, have=("rg",))
    assert strict.returncode == 1
    assert "missing bubblewrap; install them with: sudo apt-get install bubblewrap" in strict.stderr
    lenient = _run(tmp_path, "--warn-unless-ci")
    assert lenient.returncode == 0 and "missing ripgrep bubblewrap" in lenient.stderr
    assert "going on without them" in lenient.stderr
    assert _run(tmp_path, "--warn-unless-ci", ci=True).returncode == 1  # CI=true: a missing package fails
    assert os.access(SCRIPT, os.X_OK)
