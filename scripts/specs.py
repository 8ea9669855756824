#!/usr/bin/env python3
"""Fetch the vendor API specs the contract tests check against (``make specs``); standard library only.

The published descriptions of the Slack, Notion, Linear and Datadog APIs (and KubeRay's RayCluster CRD) are not
copied into the repository. Each is pinned in ``scripts/specs.json`` (file, repository, commit, path, sha256) and
fetched into a git-ignored cache, ``.specs/`` at the repository root (``LABBOT_SPECS_DIR`` or ``--dest`` to put it
elsewhere). For each file, in order:

1. the cache, if its copy has the pinned sha256 (a copy that does not is fetched again);
2. a local mirror folder holding the files under their names: ``LABBOT_SPECS_MIRROR`` or ``--mirror``; by default
   ``../shared/specs`` beside the repository, where machines without internet keep one (used when it exists);
3. HTTP: ``{base}/{repo}/{commit}/{path}`` with base ``LABBOT_SPECS_BASE_URL`` or ``--base-url``, by default
   https://raw.githubusercontent.com (which serves a file at a commit under exactly that layout).

An empty ``LABBOT_SPECS_MIRROR`` or ``LABBOT_SPECS_BASE_URL`` turns that source off. Every byte is checked against
the pinned sha256 before it enters the cache: a copy that differs is refused, with the file, the expected and the
actual sha256 and where it came from. One line per file is printed, then a summary.

Exit status: 0 when every file is in the cache, 1 otherwise. With ``--warn-unless-ci`` (what ``make test`` uses),
missing files only warn (exit 0) unless the environment has ``CI=true``: a clone with no network and no mirror still
runs its tests, the contract tests among them reported as not run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path(__file__).resolve().with_name("specs.json")
DEFAULT_DEST = ROOT / ".specs"
DEFAULT_MIRROR = ROOT.parent / "shared" / "specs"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
TIMEOUT_S = 30.0


class Unreachable(OSError):
    """The base URL did not answer at all (no network, no DNS, refused, timed out): not worth asking again."""


@dataclass(frozen=True)
class Spec:
    """One pinned file: its name in the cache, and where it is published."""

    file: str
    repo: str
    commit: str
    path: str
    sha256: str

    def url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"


@dataclass(frozen=True)
class Outcome:
    spec: Spec
    ok: bool
    line: str
    refusals: tuple[str, ...] = ()
    unreachable: bool = False


def load_manifest(path: Path = MANIFEST) -> list[Spec]:
    entries = json.loads(path.read_text())["specs"]
    return [Spec(e["file"], e["repo"], e["commit"], e["path"], e["sha256"]) for e in entries]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def _write(target: Path, data: bytes) -> None:
    """``data`` at ``target``, atomically: a reader never sees half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_url(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return bytes(answer.read())
    except urllib.error.HTTPError as e:
        raise OSError(f"HTTP {e.code} {e.reason} from {url}") from e
    except urllib.error.URLError as e:
        raise Unreachable(f"cannot reach {url}: {e.reason}") from e
    except TimeoutError as e:
        raise Unreachable(f"no answer from {url} within {timeout:g} s") from e


def fetch(
    spec: Spec,
    dest: Path,
    *,
    mirror: Path | None,
    base_url: str | None,
    timeout: float = TIMEOUT_S,
    no_http: str = "no base URL",
) -> Outcome:
    """``spec`` in ``dest`` with its pinned sha256: from the cache, else the mirror, else HTTP (``no_http``: why
    there is no base URL, for the report)."""
    target = dest / spec.file
    notes: list[str] = []
    refusals: list[str] = []
    if target.is_file():
        actual = sha256(target.read_bytes())
        if actual == spec.sha256:
            return Outcome(spec, True, f"ok       {spec.file}  (cached)")
        target.unlink()
        refusals.append(
            f"refused {spec.file} from the cache {target}: sha256 {actual}, expected {spec.sha256} (removed)"
        )
    sources: list[tuple[str, str]] = []  # (kind, where)
    if mirror is not None:
        sources.append(("mirror", str(mirror / spec.file)))
    else:
        notes.append("no mirror")
    if base_url:
        sources.append(("http", spec.url(base_url)))
    else:
        notes.append(no_http)
    unreachable = False
    for kind, where in sources:
        try:
            if kind == "mirror":
                if not Path(where).is_file():
                    notes.append(f"not in the mirror {mirror}")
                    continue
                data = Path(where).read_bytes()
            else:
                data = _read_url(where, timeout)
        except OSError as e:
            unreachable = unreachable or isinstance(e, Unreachable)
            notes.append(str(e) if kind == "http" else f"cannot read {where}: {e}")
            continue
        actual = sha256(data)
        if actual != spec.sha256:
            refusals.append(f"refused {spec.file} from {where}: sha256 {actual}, expected {spec.sha256}")
            notes.append(f"refused from {where} (sha256 differs from the pin)")
            continue
        _write(target, data)
        line = f"fetched  {spec.file}  from {where}  ({len(data):,} bytes, sha256 ok)"
        return Outcome(spec, True, line, tuple(refusals))
    return Outcome(spec, False, f"MISSING  {spec.file}  ({'; '.join(notes)})", tuple(refusals), unreachable)


def _mirror(option: str | None) -> Path | None:
    """The mirror folder: the option, else LABBOT_SPECS_MIRROR (empty: none), else the default where it exists."""
    value = option if option is not None else os.environ.get("LABBOT_SPECS_MIRROR")
    if value is None:
        return DEFAULT_MIRROR if DEFAULT_MIRROR.is_dir() else None
    return Path(value).expanduser() if value.strip() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dest", type=Path, help="the cache folder (default: $LABBOT_SPECS_DIR, else .specs/)")
    parser.add_argument("--mirror", help="a local folder holding the files by name (default: $LABBOT_SPECS_MIRROR)")
    parser.add_argument("--base-url", help=f"serves {{repo}}/{{commit}}/{{path}} (default: {DEFAULT_BASE_URL})")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="the pins (default: scripts/specs.json)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per HTTP request")
    parser.add_argument(
        "--warn-unless-ci", action="store_true", help="missing specs only warn (exit 0) unless CI=true (make test)"
    )
    args = parser.parse_args(argv)

    dest = args.dest or Path(os.environ.get("LABBOT_SPECS_DIR") or DEFAULT_DEST)
    mirror = _mirror(args.mirror)
    base_url = args.base_url if args.base_url is not None else os.environ.get("LABBOT_SPECS_BASE_URL", DEFAULT_BASE_URL)
    specs = load_manifest(args.manifest)

    missing: list[str] = []
    no_http = "no base URL"
    for spec in specs:
        outcome = fetch(spec, dest, mirror=mirror, base_url=base_url or None, timeout=args.timeout, no_http=no_http)
        if outcome.unreachable and base_url:
            no_http, base_url = f"{base_url} unreachable, not asked again", None
        for refusal in outcome.refusals:
            print(f"specs: {refusal}", file=sys.stderr)
        print(f"specs: {outcome.line}", flush=True)
        if not outcome.ok:
            missing.append(spec.file)

    if not missing:
        print(f"specs: all {len(specs)} vendor specs are in {dest}, sha256 checked")
        return 0
    summary = (
        f"specs: {len(missing)} of {len(specs)} vendor specs missing from {dest} ({', '.join(missing)}): "
        "no mirror and no network? Run `make specs` where either is available"
    )
    if args.warn_unless_ci and not in_ci():
        print(f"{summary}. The contract tests that need them will be skipped (with CI=true this is an error).")
        return 0
    print(f"{summary}.{' CI=true: the contract tests cannot run without them.' if in_ci() else ''}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
