"""The deploy guide's files (docs/deploy.md), checked statically: no Docker and no cluster here.

* ``deploy/``: every YAML parses, every object has apiVersion, kind and metadata.name; kustomization.yaml lists files
  that exist; every variable set on a labbot container is one labbot reads — derived from the code (each
  ``env.get("NAME")``, ``os.environ["NAME"]``, ``os.getenv(NAME)``, constants resolved) and the README's
  configuration table, plus the AWS ones its S3 store uses — so a variable another branch adds is picked up when it
  merges, and a manifest setting an unknown ``LABBOT_*`` fails; its args are a real ``labbot`` command (the CLI's own
  parser); probes and scrape paths are routes of the app; no image is ``:latest``; labbot never runs as root; a
  secret-looking variable comes from a Secret, and the Secret template holds placeholders only.
* ``Dockerfile``: multi-stage, the final stage non-root (a numeric UID) with no torch (and nothing copied from a stage
  that installs it), its entrypoint the ``labbot`` console script and its CMD a real command.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.requests import Request

from labbot.bot.api.probes import ProbeAccess, Readiness, is_loopback
from labbot.bot.cli.main import CLIError, build_parser
from labbot.bot.config import STORAGE_ENV, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: where the control plane's code is (the reference jobs are not: they run on Ray with the job's own environment)
CONTROL_PLANE = ("bot", "agents", "mcp_servers", "evals", "training", "storage", "common")
#: read by what labbot uses (boto3 / s3fs for LABBOT_ARTIFACTS_URL=s3://...), not by labbot's own code
AWS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_REGION"}
#: what labbot sets for every job (labbot_client reads them there); on the control plane they would be wrong
JOB_ONLY = {"LABBOT_RUN_ID", "LABBOT_ATTEMPT", "LABBOT_CONTROL_URL", "LABBOT_TELEMETRY_TOKEN", "LABBOT_CHECKPOINT_DIR"}
SECRETISH = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|DATABASE_URL")
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


# ---- what labbot reads, from the code --------------------------------------------------------------------------


def _sources() -> Iterator[Path]:
    for layer in CONTROL_PLANE:
        for path in sorted((ROOT / layer).rglob("*.py")):
            if "jobs" not in path.relative_to(ROOT / layer).parts[:-1]:
                yield path


def _is_environ(node: ast.expr) -> bool:
    """``os.environ``, ``environ``, ``env``, ``self.env`` and the like: a mapping of the environment."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("environ", "env", "environment")


def env_names_read() -> set[str]:
    """Every variable name labbot's control-plane code reads from an environment mapping."""
    trees = [ast.parse(p.read_text(), str(p)) for p in _sources()]
    constants: dict[str, set[str]] = {}
    for tree in trees:  # NAME = "LABBOT_X" anywhere at module level, so imported constants resolve too
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                value = node.value.value
                if isinstance(value, str) and ENV_NAME.fullmatch(value):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            constants.setdefault(target.id, set()).add(value)

    def names(arg: ast.expr) -> set[str]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and ENV_NAME.fullmatch(arg.value):
            return {arg.value}
        if isinstance(arg, ast.Name):
            return constants.get(arg.id, set())
        return set()

    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                receiver, method = node.func.value, node.func.attr
                if (method in ("get", "pop") and _is_environ(receiver)) or (
                    method == "getenv" and isinstance(receiver, ast.Name) and receiver.id == "os"
                ):
                    found |= names(node.args[0])
            elif isinstance(node, ast.Subscript) and _is_environ(node.value):
                found |= names(node.slice)
    return found


def readme_table_names() -> set[str]:
    """The variables in the first column of the README's configuration table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}


KNOWN = (env_names_read() | readme_table_names() | AWS) - JOB_ONLY


def test_the_scan_finds_what_labbot_is_known_to_read() -> None:
    """The derivation has teeth: names read through a literal, a module constant and an imported constant."""
    read = env_names_read()
    assert {"LABBOT_DATABASE_URL", "LABBOT_HOME", "SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY", "RAY_AUTH_TOKEN"} <= read
    assert {"LABBOT_MCP_TOKEN", "LINEAR_API_KEY"} <= read  # TOKEN_ENV / KEY_ENV constants in mcp_servers
    assert "LABBOT_RUN_ID" not in KNOWN and "LABBOT_NOT_A_THING" not in KNOWN
    # and every variable the README documents is one the code reads (the object store's AWS variables are read as a
    # set, STORAGE_ENV: whichever of them are set pass to the jobs that checkpoint there)
    documented = readme_table_names() - STORAGE_ENV
    assert documented <= read, sorted(documented - read)


# ---- the manifests ---------------------------------------------------------------------------------------------


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


DOCS = _documents()


def _objects(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCS if doc.get("kind") == kind]


def _pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, doc in DOCS:
        spec = doc.get("spec") or {}
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield f"{name}:{doc['metadata']['name']}", spec["template"]["spec"]
        elif doc["kind"] == "RayCluster":
            yield f"{name}:head", spec["headGroupSpec"]["template"]["spec"]
            for group in spec.get("workerGroupSpecs", []):
                yield f"{name}:{group['groupName']}", group["template"]["spec"]


def _labbot_containers() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod spec, container) of each container running the labbot image (not the Ray ones)."""
    found = []
    for where, pod in _pod_specs():
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            image = container["image"].rsplit("/", 1)[-1].split(":")[0]
            if image == "labbot":
                found.append((f"{where}/{container['name']}", pod, container))
    return found


def _data(kind: str, name: str) -> dict[str, str]:
    for doc in _objects(kind):
        if doc["metadata"]["name"] == name:
            return {**doc.get("data", {}), **doc.get("stringData", {})}
    raise AssertionError(f"{kind} {name} is referenced but not defined in deploy/")


def test_every_manifest_parses_into_named_objects() -> None:
    assert len(DOCS) >= 10, [n for n, _ in DOCS]
    for name, doc in DOCS:
        assert isinstance(doc, dict), name
        assert doc.get("apiVersion") and doc.get("kind"), name
        if doc["kind"] != "Kustomization":
            assert doc.get("metadata", {}).get("name"), f"{name}: a {doc['kind']} without metadata.name"
    kinds = {doc["kind"] for _, doc in DOCS}
    assert {"Deployment", "Service", "StatefulSet", "RayCluster", "Secret", "ConfigMap", "Kustomization"} <= kinds


def test_kustomization_lists_files_that_exist_and_leaves_the_secret_template_out() -> None:
    (kustomization,) = _objects("Kustomization")
    resources = kustomization["resources"]
    for resource in resources:
        assert (DEPLOY / resource).is_file(), resource
    # a placeholder Secret applied with `kubectl apply -k` would overwrite the real one
    assert "secret.example.yaml" not in resources
    images = {i["name"] for i in kustomization.get("images", [])}
    assert {"labbot", "labbot-ray"} <= images


def test_the_layout_the_guide_describes() -> None:
    (deployment,) = [d for d in _objects("Deployment") if d["metadata"]["name"] == "labbot"]
    assert deployment["spec"]["replicas"] == 2
    (ray,) = _objects("RayCluster")
    assert ray["apiVersion"] == "ray.io/v1"
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert ray["spec"]["rayVersion"] == pins["ray"]
    gpus = [
        c["resources"]["limits"].get("nvidia.com/gpu")
        for g in ray["spec"]["workerGroupSpecs"]
        for c in g["template"]["spec"]["containers"]
    ]
    assert any(gpus), "no GPU worker group"
    assert any(d["metadata"]["name"] == "labbot-postgres" for d in _objects("StatefulSet"))
    services = {s["metadata"]["name"] for s in _objects("Service")}
    assert {"labbot", "labbot-postgres"} <= services
    assert "labbot-ray-head-svc" in _data("ConfigMap", "labbot-env")["RAY_ADDRESS"]  # KubeRay's name for its head


def _container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Every variable the container gets, with where it comes from ("value", "secret", "configmap")."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env |= dict.fromkeys(_data("ConfigMap", source["configMapRef"]["name"]), "configmap")
        if "secretRef" in source:
            env |= dict.fromkeys(_data("Secret", source["secretRef"]["name"]), "secret")
    for item in container.get("env", []):
        origin = item.get("valueFrom", {})
        env[item["name"]] = "secret" if "secretKeyRef" in origin else "configmap" if origin else "value"
    return env


def test_labbot_containers_set_only_variables_labbot_reads() -> None:
    containers = _labbot_containers()
    assert len(containers) >= 2  # the Deployment's labbot, the db-upgrade Job
    (serve,) = [(pod, c) for where, pod, c in containers if c.get("args") == ["serve"]]
    assert _container_env(*serve).get("LABBOT_ADMIN_TOKEN") == "secret", "every replica the same token, from a Secret"
    for where, pod, container in containers:
        env = _container_env(pod, container)
        unknown = sorted(set(env) - KNOWN)
        assert not unknown, (
            f"{where} sets {unknown}, which labbot does not read (no env.get/os.environ of it in the code, not in "
            "the README's configuration table)"
        )
        job_only = sorted(set(env) & JOB_ONLY)
        assert not job_only, f"{where} sets {job_only}: labbot sets those for each job, not for itself"


def test_an_unknown_labbot_variable_would_be_caught() -> None:
    assert "LABBOT_DATABASE_URL" in KNOWN
    assert not {"LABBOT_DATABSE_URL", "LABBOT_TOKEN", "SLACK_TOKEN"} & KNOWN


def test_secrets_are_referenced_never_inlined() -> None:
    for where, pod, container in _labbot_containers():
        for name, origin in _container_env(pod, container).items():
            if SECRETISH.search(name):
                assert origin == "secret", f"{where}: {name} must come from a Secret, not a {origin}"
    for name, doc in DOCS:  # nobody's env inlines a secret value (the Ray and PostgreSQL containers neither)
        if doc.get("kind") != "Secret":
            for item in _walk_env(doc):
                # a *_PATH names where a file is (RAY_AUTH_TOKEN_PATH: a mounted Secret), not a secret
                if SECRETISH.search(item["name"]) and not item["name"].endswith("_PATH"):
                    assert "value" not in item, f"{name}: {item['name']} inlined"
    for doc in _objects("ConfigMap"):
        assert not [k for k in doc["data"] if SECRETISH.search(k)], doc["metadata"]["name"]
    for doc in _objects("Secret"):  # the template: placeholders only
        for key, value in {**doc.get("data", {}), **doc.get("stringData", {})}.items():
            assert value.startswith("<") and value.endswith(">"), f"{doc['metadata']['name']}.{key}: not a placeholder"


def _walk_env(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                yield from (v for v in value if isinstance(v, dict) and "name" in v)
            else:
                yield from _walk_env(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk_env(value)


def test_labbot_containers_run_real_commands() -> None:
    parser = build_parser()
    for where, _, container in _labbot_containers():
        if "command" in container:  # an init container's shell: it must not replace labbot's own entrypoint
            assert "args" not in container and container["command"][0] == "sh", where
            continue
        args = container["args"]
        parser.parse_args(args)  # raises CLIError (exit code 2) on anything labbot does not accept
    (deployment,) = [d for d in _objects("Deployment") if d["metadata"]["name"] == "labbot"]
    (main,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "labbot"]
    assert main["args"] == ["serve"]


def _routes() -> set[str]:
    paths = set()
    for path in (ROOT / "bot").rglob("*.py"):
        paths |= set(re.findall(r"""Route\(\s*["']([^"']+)["']""", path.read_text()))
    return paths


def test_probes_and_scrapes_point_at_routes_of_the_app() -> None:
    routes = _routes()
    assert "/healthz" in routes
    paths = []
    for where, _, container in _labbot_containers():
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe in container:
                paths.append((where, container[probe]["httpGet"]["path"]))
    for doc in _objects("Deployment"):
        annotations = doc["spec"]["template"]["metadata"].get("annotations", {})
        if "prometheus.io/path" in annotations:
            paths.append(("prometheus.io/path", annotations["prometheus.io/path"]))
    for doc in _objects("ServiceMonitor"):
        paths += [("ServiceMonitor", e["path"]) for e in doc["spec"]["endpoints"]]
    assert {"/healthz", "/readyz", "/metrics"} <= {p for _, p in paths}
    for where, path in paths:
        assert path in routes, f"{where}: {path} is not a route of the app"


def test_the_probes_and_the_scrape_pass_labbots_rule_beyond_loopback() -> None:
    """labbot binds 0.0.0.0 in the pod, so ``/readyz`` and ``/metrics`` follow the rule for a listener beyond loopback
    (``labbot.bot.api.probes``). The deploy's choice: the metrics token from a Secret, no open probes — the kubelet's
    probe (no header) gets ``/readyz``'s status code and nothing more, the ServiceMonitor sends the token."""
    (serve,) = [(pod, c) for _, pod, c in _labbot_containers() if c.get("args") == ["serve"]]
    env = _container_env(*serve)
    host = next(item["value"] for item in serve[1]["env"] if item["name"] == "LABBOT_HOST")
    assert not is_loopback(host)
    assert env.get("LABBOT_METRICS_TOKEN") == "secret" and "LABBOT_OPEN_PROBES" not in env
    access = ProbeAccess.for_bind(host, token="from-the-secret", open_probes=False)
    probe = Request({"type": "http", "method": "GET", "path": "/readyz", "headers": []})  # what a kubelet sends
    assert access.readiness(probe) is Readiness.VERDICT and access.metrics(probe) is not None
    assert serve[1]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for doc in _objects("ServiceMonitor"):
        for endpoint in doc["spec"]["endpoints"]:
            if endpoint["path"] == "/metrics":
                credentials = endpoint["authorization"]["credentials"]
                assert endpoint["authorization"]["type"] == "Bearer"
                assert (credentials["name"], credentials["key"]) == ("labbot-secrets", "LABBOT_METRICS_TOKEN")


def test_images_are_pinned() -> None:
    for where, pod in _pod_specs():
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            image = container["image"]
            tagged = ":" in image.rsplit("/", 1)[-1] or "@sha256:" in image
            kustomized = image in ("labbot", "labbot-ray")  # kustomization.yaml's images: sets the tag
            assert (tagged or kustomized) and not image.endswith(":latest"), f"{where}: {image}"
    (kustomization,) = _objects("Kustomization")
    for image in kustomization["images"]:
        assert image.get("newTag") and image["newTag"] != "latest", image


def test_nothing_runs_as_root() -> None:
    for where, pod in _pod_specs():
        pod_ctx = pod.get("securityContext", {})
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            ctx = {**pod_ctx, **container.get("securityContext", {})}
            assert ctx.get("runAsNonRoot") is True, f"{where}/{container['name']}"
            assert ctx.get("runAsUser", 1) != 0, f"{where}/{container['name']}"
            assert ctx.get("allowPrivilegeEscalation") is False, f"{where}/{container['name']}"
    for where, pod, container in _labbot_containers():
        ctx = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        assert ctx["runAsUser"] == 10001 and ctx.get("readOnlyRootFilesystem") is True, where


def test_labbot_toml_of_the_configmap_is_one_labbot_accepts(tmp_path: Path) -> None:
    toml = _data("ConfigMap", "labbot-config")["labbot.toml"]
    tomllib.loads(toml)
    config = tmp_path / "labbot.toml"
    config.write_text(toml)
    settings = Settings.from_env({"LABBOT_CONFIG": str(config), "LABBOT_HOME": str(tmp_path / "home")})
    assert settings.config == tomllib.loads(toml)
    settings.ab_test  # noqa: B018 (checked strictly when read)
    mount = {
        m["mountPath"] for _, _, c in _labbot_containers() for m in c.get("volumeMounts", []) if m["name"] == "config"
    }
    assert {str(Path(_data("ConfigMap", "labbot-env")["LABBOT_CONFIG"]).parent)} == mount


# ---- the Dockerfile --------------------------------------------------------------------------------------------


def _stages() -> list[dict[str, Any]]:
    """Each stage: its name, base, instructions (continuation lines joined) and the stages it copies from."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else str(len(stages))
            stages.append({"name": name, "base": parts[0], "lines": [], "from": set()})
            continue
        stages[-1]["lines"].append((word.upper(), rest))
        if word.upper() == "COPY" and "--from=" in rest:
            stages[-1]["from"].add(re.search(r"--from=(\S+)", rest).group(1))  # type: ignore[union-attr]
    return stages


def _installs_torch(stage: dict[str, Any]) -> bool:
    """A ``pip install`` naming torch or the ``jobs`` extra (torch) in one of the stage's RUN commands."""
    install = re.compile(r"pip install[^&;|]*(\btorch\b|\[jobs\])")
    return any(word == "RUN" and install.search(rest) for word, rest in stage["lines"])


def test_dockerfile_is_multi_stage_and_its_final_stage_is_the_control_plane() -> None:
    stages = _stages()
    assert len(stages) >= 2
    final = stages[-1]
    by_name = {s["name"]: s for s in stages}
    assert final["from"] and final["from"] <= set(by_name), final["from"]
    # no torch in the control plane: not installed in it, nor in a stage it copies from
    for stage in [final, *(by_name[n] for n in final["from"])]:
        assert not _installs_torch(stage), f"stage {stage['name']} installs torch"
    assert not any(word == "RUN" and "build-essential" in rest for word, rest in final["lines"])
    # the image of the Ray nodes is the one that has it
    assert any(_installs_torch(s) for s in stages[:-1])


def test_dockerfile_final_stage_runs_labbot_as_a_non_root_user() -> None:
    final = _stages()[-1]
    users = [rest.split(":")[0] for word, rest in final["lines"] if word == "USER"]
    assert users and users[-1].isdigit() and int(users[-1]) != 0, users  # numeric: runAsNonRoot can check it
    assert int(users[-1]) == 10001  # what deploy/ runs as
    env = " ".join(rest for word, rest in final["lines"] if word == "ENV")
    assert "LABBOT_HOST=0.0.0.0" in env
    assert any(word == "EXPOSE" and "3000" in rest for word, rest in final["lines"])


def test_dockerfile_entrypoint_is_the_labbot_command() -> None:
    final = dict(_stages()[-1]["lines"])
    entrypoint, cmd = (ast.literal_eval(final[k]) for k in ("ENTRYPOINT", "CMD"))
    assert entrypoint == ["labbot"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["labbot"] == "labbot.bot.cli.main:main"  # the console script is the parser checked here
    build_parser().parse_args(cmd)
    assert cmd == ["serve"]


@pytest.mark.parametrize("bad", [["serv"], ["db", "downgrade"], ["--serve"]])
def test_the_command_check_has_teeth(bad: list[str]) -> None:
    with pytest.raises(CLIError):
        build_parser().parse_args(bad)


def test_the_guide_is_linked_and_names_the_files() -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert "docs/deploy.md" in (ROOT / "README.md").read_text()
    for path in sorted(DEPLOY.glob("*.yaml")):
        assert f"deploy/{path.name}" in guide, f"docs/deploy.md does not mention deploy/{path.name}"
    for words in ("pg_dump", "pg_restore", "labbot db upgrade", "/readyz", "/metrics", "RAY_ADDRESS"):
        assert words in guide, words
