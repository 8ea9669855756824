"""Task trees: archives unpacked with links that leave the tree left out, and fresh one-commit repositories (git
only: no Python process is started)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from gen_support import git

from labbot.evals.generation.generator import extract, fresh_repository


def tar_of(members: list[tuple[str, str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
                tar.addfile(info)
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755 if kind == "exe" else 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_leaves_out_links_that_leave_the_tree(tmp_path):
    archive = tar_of(
        [
            ("pkg/", "dir", b""),
            ("pkg/mod.py", "file", b"x = 1\n"),
            ("pkg/run.sh", "exe", b"#!/bin/sh\n"),
            ("pkg/alias.py", "link", b"mod.py"),
            ("up", "link", b"pkg/../pkg/mod.py"),
            ("secret", "link", b"/etc/passwd"),
            ("escape", "link", b"../outside"),
            ("pkg/escape2", "link", b"../../outside"),
            ("here", "link", b"."),
            ("chain", "link", b"here/../outside"),
            ("docs/", "dir", b""),
            ("docs/readme", "link", b"../pkg/mod.py"),
            ("../evil.py", "file", b"boom"),
        ]
    )
    skipped = extract(archive, tmp_path / "tree")
    assert sorted(skipped) == ["../evil.py", "chain", "escape", "pkg/escape2", "secret"]
    tree = tmp_path / "tree"
    assert (tree / "pkg" / "alias.py").read_text() == "x = 1\n" and os.readlink(tree / "up") == "pkg/../pkg/mod.py"
    assert os.access(tree / "pkg" / "run.sh", os.X_OK) and not os.access(tree / "pkg" / "mod.py", os.X_OK)
    assert not (tmp_path / "evil.py").exists()
    assert (tree / "docs" / "readme").read_text() == "x = 1\n" and not (tree / "chain").is_symlink()


def test_a_fresh_repository_holds_exactly_the_tree_in_one_commit(tmp_path):
    tree = tmp_path / "tree"
    (tree / "a dir").mkdir(parents=True)
    (tree / "a dir" / 'quote"and space.py').write_text("q = 1\n")
    (tree / "back\\slash.txt").write_text("b\n")
    (tree / '"leading-quote').write_text("l\n")
    (tree / "empty.txt").write_text("")
    (tree / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (tree / "run.sh").chmod(0o755)
    (tree / "link").symlink_to("run.sh")
    commit = fresh_repository(tree, "task 01-x")
    assert git(tree, "rev-parse", "HEAD").strip() == commit
    assert git(tree, "log", "--all", "--format=%an|%ae|%aI|%cn|%cI|%s").strip().splitlines() == [
        "labbot|labbot@localhost|2000-01-01T00:00:00+00:00|labbot|2000-01-01T00:00:00+00:00|task 01-x"
    ]
    staged = {line.split("\t")[1]: line.split()[0] for line in git(tree, "ls-files", "-s", "-z").split("\0") if line}
    assert staged == {
        '"leading-quote': "100644", 'a dir/quote"and space.py': "100644", "back\\slash.txt": "100644",
        "empty.txt": "100644", "link": "120000", "run.sh": "100755",
    }  # fmt: skip
    assert git(tree, "status", "--porcelain", "--untracked-files=all").strip() == ""
    assert git(tree, "fsck", "--unreachable", "--no-reflogs", "--no-progress").strip() == ""
    assert git(tree, "reflog", "--all").strip() == "" and git(tree, "remote").strip() == ""
    assert not (tree / ".git" / "logs").exists() and not (tree / ".git" / "hooks").exists()
    # the same tree gives the same commit (fixed author, committer and date)
    again = tmp_path / "again"
    again.mkdir()
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if ".git" in rel.parts:
            continue
        if path.is_symlink():
            (again / rel).symlink_to(os.readlink(path))
        elif path.is_dir():
            (again / rel).mkdir(parents=True, exist_ok=True)
        else:
            (again / rel).write_bytes(path.read_bytes())
            (again / rel).chmod(path.stat().st_mode)
    assert fresh_repository(again, "task 01-x") == commit


def test_paths_are_checked_on_their_text(tmp_path: Path):
    # a name git could never store is still refused, not resolved
    skipped = extract(tar_of([("/abs.py", "file", b"x")]), tmp_path / "t")
    assert skipped == ["/abs.py"]


def test_committed_bytecode_and_build_output_never_reach_a_task_tree(tmp_path: Path):
    # a .pyc of the module a task deletes holds the answer compiled; build/ holds it as source
    members = [
        ("pkg/__init__.py", "file", b"def f():\n    return 1\n"),
        ("pkg/__pycache__/__init__.cpython-311.pyc", "file", b"\x00compiled"),
        ("pkg/old.pyc", "file", b"\x00compiled"),
        ("build/lib/pkg/__init__.py", "file", b"def f():\n    return 1\n"),
        ("pkg.egg-info/PKG-INFO", "file", b"Name: pkg\n"),
        (".coverage", "file", b"data"),
        ("src/build/keep.py", "file", b"x = 1\n"),  # a package named build, below the top: kept
    ]
    skipped = extract(tar_of(members), tmp_path / "t")
    assert sorted(skipped) == sorted(
        [".coverage", "build/lib/pkg/__init__.py", "pkg.egg-info/PKG-INFO", "pkg/__pycache__/__init__.cpython-311.pyc",
         "pkg/old.pyc"]
    )  # fmt: skip
    assert (tmp_path / "t" / "pkg" / "__init__.py").is_file() and (
        tmp_path / "t" / "src" / "build" / "keep.py"
    ).is_file()
    assert not (tmp_path / "t" / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").exists()
