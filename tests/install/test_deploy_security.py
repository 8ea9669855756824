"""What the manifests in deploy/ let a job (any researcher's, an eval's) reach, checked statically (docs/deploy.md,
"6. The Ray cluster", "NetworkPolicies", "The Ingress"):

* every object is valid against Kubernetes' own schemas (``kubernetes-validate``, strict: an unknown field fails),
  and the ``RayCluster`` against KubeRay's CRD (the pinned spec, ``make specs``), unknown fields included;
* the Ray pods carry no credential in their environment (no ``*TOKEN*``/``*SECRET*``/``*KEY*``/``AWS_*`` variable, no
  Secret through ``env`` or ``envFrom``): Ray's token is a file from its own Secret, ``RAY_AUTH_TOKEN_PATH``, the
  same Secret labbot submits with, and no other Secret is mounted there;
* every labbot and Ray container is non-root, with no privilege escalation, every capability dropped, a read-only
  root filesystem (and a writable ``/tmp``), RuntimeDefault seccomp; no pod mounts a ServiceAccount token, except
  KubeRay's autoscaler sidecar, alone;
* the NetworkPolicies, evaluated the way Kubernetes does over the pods' real labels (KubeRay's added): who reaches
  PostgreSQL, Ray's ports and labbot's HTTP port, and nobody else; the jobs' egress misses the metadata service;
* the Ingress publishes exactly a listed set of paths, each a route of the app, which covers every ``/api/v1`` path
  the ``labbot`` CLI calls (read from its code) and nothing it does not.
"""

from __future__ import annotations

import ast
import functools
import ipaddress
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from vendor_specs import spec_path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: a Kubernetes version the manifests must be valid for (kubernetes-validate's bundled schemas)
K8S_VERSION = "1.30"
#: names a variable holding a credential would have
CREDENTIAL = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|CREDENTIAL|^AWS_")
RAY_TOKEN_SECRET = "labbot-ray-token"
METADATA_SERVICE = ("169.254.169.254", "fd00:ec2::254")
#: what deploy/ingress.yaml publishes: (path, pathType)
INGRESS_PATHS = {
    ("/slack/events", "Exact"),
    ("/plots/", "Prefix"),
    ("/api/v1/jobs", "Exact"),
    ("/api/v1/runs", "Prefix"),
    ("/api/v1/pages", "Prefix"),
    ("/api/v1/capacity", "Exact"),
    ("/api/v1/compare", "Exact"),
    ("/api/v1/experiments", "Prefix"),
    ("/api/v1/claims/check", "Exact"),
    ("/api/v1/findings", "Prefix"),
    ("/api/v1/research", "Prefix"),
    ("/api/v1/evals", "Prefix"),
    ("/api/v1/feedback", "Exact"),
    ("/api/v1/ab", "Exact"),
    ("/api/v1/audit", "Exact"),
}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, doc)
        for path in sorted(DEPLOY.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc is not None
    ]


DOCS = _documents()


def _objects(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCS if doc["kind"] == kind]


def _one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _objects(kind) if d["metadata"]["name"] == name]
    return found


def _namespace() -> str:
    (kustomization,) = _objects("Kustomization")
    return str(kustomization["namespace"])


# ---- the pods, with the labels they will really carry ----------------------------------------------------------


@dataclass
class Pod:
    name: str  # "labbot", "ray-head", "ray-gpu", ...
    labels: dict[str, str]
    spec: dict[str, Any]
    ray: bool = False
    namespace: str = field(default_factory=_namespace)

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]


def _pods() -> dict[str, Pod]:
    pods: dict[str, Pod] = {}
    for _, doc in DOCS:
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            template = doc["spec"]["template"]
            pods[doc["metadata"]["name"]] = Pod(
                doc["metadata"]["name"], dict(template.get("metadata", {}).get("labels", {})), template["spec"]
            )
        elif doc["kind"] == "RayCluster":
            cluster, spec = doc["metadata"]["name"], doc["spec"]
            groups = [("head", "headgroup", spec["headGroupSpec"])]
            groups += [("worker", g["groupName"], g) for g in spec.get("workerGroupSpecs", [])]
            for node_type, group, group_spec in groups:
                template = group_spec["template"]
                labels = dict(template.get("metadata", {}).get("labels", {}))
                # what KubeRay adds to every pod it makes (ray-operator's labels)
                labels |= {
                    "ray.io/cluster": cluster,
                    "ray.io/node-type": node_type,
                    "ray.io/group": group,
                    "ray.io/is-ray-node": "yes",
                    "app.kubernetes.io/name": "kuberay",
                    "app.kubernetes.io/created-by": "kuberay-operator",
                }
                name = "ray-head" if node_type == "head" else f"ray-{group}"
                pods[name] = Pod(name, labels, template["spec"], ray=True)
    return pods


PODS = _pods()
RAY_PODS = [p for p in PODS.values() if p.ray]


def _autoscaler() -> dict[str, Any]:
    """KubeRay's autoscaler sidecar in the head pod, as far as the manifest shapes it (autoscalerOptions)."""
    (ray,) = _objects("RayCluster")
    assert ray["spec"].get("enableInTreeAutoscaling") is True
    return dict(ray["spec"]["autoscalerOptions"], name="autoscaler")


def _secret_keys(name: str) -> set[str]:
    doc = _one("Secret", name)
    return set(doc.get("data", {})) | set(doc.get("stringData", {}))


def _configmap(name: str) -> dict[str, str]:
    return dict(_one("ConfigMap", name)["data"])


# ---- schemas -----------------------------------------------------------------------------------------------------

#: kinds Kubernetes' own schemas do not describe: kustomize's file, KubeRay's and the Prometheus Operator's CRDs
NOT_CORE = {"Kustomization", "RayCluster", "ServiceMonitor"}
CORE = {f"{n}:{d['kind']}/{d['metadata']['name']}": d for n, d in DOCS if d["kind"] not in NOT_CORE}


@pytest.mark.parametrize("where", sorted(CORE))
def test_each_object_is_valid_for_kubernetes(where: str) -> None:
    kubernetes_validate.validate(CORE[where], K8S_VERSION, strict=True)


def test_every_kind_is_validated_somewhere() -> None:
    kinds = {d["kind"] for _, d in DOCS}
    assert {"Deployment", "StatefulSet", "Job", "Service", "Ingress", "NetworkPolicy", "Secret"} <= kinds - NOT_CORE
    assert kinds & NOT_CORE == NOT_CORE  # RayCluster: against KubeRay's CRD below


def test_the_schema_check_has_teeth() -> None:
    deployment = yaml.safe_load(yaml.safe_dump(_one("Deployment", "labbot")))
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    policy = yaml.safe_load(yaml.safe_dump(_one("NetworkPolicy", "labbot-postgres")))
    policy["spec"]["ingress"][0]["ports"][0]["port"] = [5432]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(policy, K8S_VERSION, strict=True)


@functools.cache  # a megabyte of YAML: parsed once
def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(spec_path("kuberay-rayclusters-crd.yaml").read_text())
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return dict(v1["schema"]["openAPIV3Schema"])


def _crd_problems(value: Any, schema: dict[str, Any], where: str = "") -> Iterator[str]:
    """What the API server would refuse (a wrong type or enum) or silently drop (a field the schema does not know):
    jsonschema alone lets an unknown field through, since a CRD's schema never says additionalProperties: false."""
    if schema.get("x-kubernetes-int-or-string"):
        pattern = schema.get("pattern")
        if isinstance(value, str) and pattern and not re.match(pattern, value):
            yield f"{where}: {value!r} is not a quantity the API server accepts"  # "4 GB", "2 cores"
        elif not isinstance(value, str | int) or isinstance(value, bool):
            yield f"{where}: {value!r} is neither an integer nor a string"
        return
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                yield from _crd_problems(item, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                yield from _crd_problems(item, extra, f"{where}.{key}")
            elif props is not None:
                yield f"{where}.{key}: not a field of the CRD (the API server would drop it)"
        for key in schema.get("required", []):
            if key not in value:
                yield f"{where}: {key} is required"
    elif kind == "array" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _crd_problems(item, schema.get("items", {}), f"{where}[{i}]")
    elif kind == "object" or kind == "array":
        yield f"{where}: a {type(value).__name__}, not an {kind}"
    elif kind == "string" and not isinstance(value, str):
        yield f"{where}: {value!r} is not a string"
    elif kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        yield f"{where}: {value!r} is not an integer"
    elif kind == "boolean" and not isinstance(value, bool):
        yield f"{where}: {value!r} is not a boolean"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{where}: {value!r} is not one of {schema['enum']}"


def _quantity_pattern() -> str:
    """Kubernetes' resource.Quantity syntax, as the pinned KubeRay CRD states it (a container's resources): the
    Kubernetes schemas kubernetes-validate holds give a quantity as "a string or a number" and nothing more, so a
    "2 cores" passes them, which the API server refuses."""
    limits = _crd_schema()["properties"]["spec"]["properties"]["headGroupSpec"]["properties"]["template"]
    container = limits["properties"]["spec"]["properties"]["containers"]["items"]
    quantity = container["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
    assert quantity.get("x-kubernetes-int-or-string"), quantity
    return str(quantity["pattern"])


def _quantity_problems(doc: dict[str, Any]) -> list[str]:
    """Every container resource (requests, limits) in ``doc``'s pod templates that is not a valid quantity."""
    pattern = re.compile(_quantity_pattern())
    out = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "resources" and isinstance(item, dict) and {"limits", "requests"} & set(item):
                    for kind in ("limits", "requests"):
                        for name, amount in (item.get(kind) or {}).items():
                            text = str(amount) if isinstance(amount, int | float) else amount
                            if not isinstance(text, str) or isinstance(amount, bool) or not pattern.match(text):
                                out.append(f"{where}.{key}.{kind}.{name}: {amount!r} is not a quantity")
                else:
                    walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")

    walk(doc, f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}")
    return out


def test_every_resource_quantity_is_one_the_api_server_accepts() -> None:
    assert [p for _, d in DOCS for p in _quantity_problems(d)] == []
    assert any(_quantity_problems(d) == [] and "resources" in json.dumps(d) for _, d in DOCS)
    # with teeth: a quantity in words, in a Deployment (which kubernetes-validate lets through) and in the RayCluster
    deployment = yaml.safe_load(yaml.safe_dump(_one("Deployment", "labbot")))
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2 cores"
    kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)  # the Kubernetes schemas do not see it
    assert _quantity_problems(deployment) == [
        "Deployment/labbot.spec.template.spec.containers[0].resources.limits.cpu: '2 cores' is not a quantity"
    ]
    (ray,) = _objects("RayCluster")
    broken = yaml.safe_load(yaml.safe_dump(ray))
    broken["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4 GB"
    problems = list(_crd_problems(broken, _crd_schema()))
    assert any("limits.memory: '4 GB' is not a quantity" in p for p in problems), problems


def test_the_raycluster_is_valid_against_kuberays_crd() -> None:
    schema = _crd_schema()
    (ray,) = _objects("RayCluster")
    assert ray["apiVersion"] == "ray.io/v1"
    assert list(_crd_problems(ray, schema)) == []
    # with teeth: a misspelt field, a wrong type, a bad enum
    broken = yaml.safe_load(yaml.safe_dump(ray))
    broken["spec"]["autoscalerOptions"]["volumeMount"] = broken["spec"]["autoscalerOptions"].pop("volumeMounts")
    broken["spec"]["workerGroupSpecs"][0]["maxReplicas"] = "8"
    broken["spec"]["headGroupSpec"]["template"]["spec"]["securityContext"]["seccompProfile"]["typ"] = "RuntimeDefault"
    problems = list(_crd_problems(broken, schema))
    assert any("autoscalerOptions.volumeMount:" in p for p in problems), problems
    assert any("maxReplicas" in p for p in problems), problems
    assert any("seccompProfile.typ:" in p for p in problems), problems


# ---- no credential in the Ray pods' environment --------------------------------------------------------------------


def _ray_containers() -> list[tuple[str, Pod | None, dict[str, Any]]]:
    found: list[tuple[str, Pod | None, dict[str, Any]]] = [
        (f"{p.name}/{c['name']}", p, c) for p in RAY_PODS for c in p.containers
    ]
    head = PODS["ray-head"]
    found.append(("ray-head/autoscaler", head, _autoscaler()))
    return found


def _secret_volumes(pod: Pod) -> dict[str, str]:
    """Volume name → the Secret it holds, plain or projected."""
    out = {}
    for volume in pod.spec.get("volumes", []):
        if "secret" in volume:
            out[volume["name"]] = volume["secret"]["secretName"]
        for source in volume.get("projected", {}).get("sources", []):
            if "secret" in source:
                out[volume["name"]] = source["secret"]["name"]
    return out


def credential_problems(pod: Pod, container: dict[str, Any]) -> list[str]:
    """Why ``container``'s environment would hand a job a credential (empty: it would not)."""
    problems = []
    for source in container.get("envFrom", []):
        if "secretRef" in source:
            problems.append(f"envFrom the Secret {source['secretRef']['name']}")
        if "configMapRef" in source:
            names = _configmap(source["configMapRef"]["name"])
            problems += [f"{n} (envFrom a ConfigMap)" for n in names if CREDENTIAL.search(n)]
    mounts = {m["mountPath"].rstrip("/"): m["name"] for m in container.get("volumeMounts", [])}
    secrets = _secret_volumes(pod)
    for item in container.get("env", []):
        name, origin = item["name"], item.get("valueFrom", {})
        if "secretKeyRef" in origin:
            problems.append(f"{name} from the Secret {origin['secretKeyRef']['name']}")
        elif name.endswith("_PATH") and "value" in item:  # where a file is: must be a mounted Secret's
            folder = str(Path(item["value"]).parent)
            if secrets.get(mounts.get(folder, "")) is None:
                problems.append(f"{name}={item['value']} is not in a mounted Secret")
        elif CREDENTIAL.search(name):
            problems.append(name)
    return problems


@pytest.mark.parametrize("where", [w for w, _, _ in _ray_containers()])
def test_no_credential_in_a_ray_containers_environment(where: str) -> None:
    pod, container = next((p, c) for w, p, c in _ray_containers() if w == where)
    assert pod is not None
    assert credential_problems(pod, container) == [], f"{where}: every job on the cluster would inherit it"
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("RAY_AUTH_MODE") == "token", f"{where}: Ray's token auth must stay on"
    # the token as a file of its own Secret, mounted read-only
    path = Path(env["RAY_AUTH_TOKEN_PATH"] or "")
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"].rstrip("/") == str(path.parent)]
    assert mount.get("readOnly") is True, where
    (volume,) = [v for v in pod.spec["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == RAY_TOKEN_SECRET and path.name in _secret_keys(RAY_TOKEN_SECRET)
    assert volume["secret"].get("defaultMode", 0o644) & 0o007 == 0, "the token file readable by other users"


def test_the_credential_check_has_teeth() -> None:
    pod = PODS["ray-gpu"]
    (container,) = pod.spec["containers"]
    for bad in (
        {"name": "RAY_AUTH_TOKEN", "valueFrom": {"secretKeyRef": {"name": RAY_TOKEN_SECRET, "key": "auth_token"}}},
        {"name": "AWS_ACCESS_KEY_ID", "value": "AKIA"},
        {"name": "HF_TOKEN", "value": "hf_x"},
        {"name": "WANDB_API_KEY", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}},
        {"name": "GOOGLE_APPLICATION_CREDENTIALS_PATH", "value": "/tmp/creds.json"},  # a path, but not a Secret's
    ):
        assert credential_problems(pod, {**container, "env": [*container["env"], bad]}), bad
    for source in ({"secretRef": {"name": "labbot-secrets"}}, {"configMapRef": {"name": "labbot-env"}}):
        assert credential_problems(pod, {**container, "envFrom": [source]}), source  # labbot-env has AWS_REGION


def test_the_ray_pods_mount_no_secret_but_rays_token() -> None:
    for pod in RAY_PODS:
        assert set(_secret_volumes(pod).values()) == {RAY_TOKEN_SECRET}, pod.name


def test_labbot_submits_with_the_same_token_and_holds_it_nowhere_else() -> None:
    (container,) = PODS["labbot"].spec["containers"]
    (token,) = [e for e in container["env"] if e["name"] == "RAY_AUTH_TOKEN"]
    ref = token["valueFrom"]["secretKeyRef"]
    assert ref["name"] == RAY_TOKEN_SECRET and ref["key"] in _secret_keys(RAY_TOKEN_SECRET)
    # not also in labbot-secrets (which the db-upgrade Job and labbot bring in whole): one place to rotate it
    assert "RAY_AUTH_TOKEN" not in _secret_keys("labbot-secrets")


def test_the_jobs_key_pair_is_labbots_to_hand_out() -> None:
    """The Ray pods hold no AWS key; labbot has the jobs' own pair (LABBOT_JOB_AWS_*) to put in each job's env."""
    keys = _secret_keys("labbot-secrets")
    assert {"LABBOT_JOB_AWS_ACCESS_KEY_ID", "LABBOT_JOB_AWS_SECRET_ACCESS_KEY"} <= keys
    (container,) = PODS["labbot"].spec["containers"]
    assert {"secretRef": {"name": "labbot-secrets"}} in container["envFrom"]


# ---- the pods' and containers' securityContext ------------------------------------------------------------------


def _hardened_containers() -> list[tuple[str, Pod, dict[str, Any]]]:
    """Every container of the labbot image and of Ray (KubeRay's autoscaler sidecar included)."""
    found = [(w, p, c) for w, p, c in _ray_containers() if p is not None]
    for pod in PODS.values():
        for c in pod.containers:
            if c["image"].rsplit("/", 1)[-1].split(":")[0] == "labbot":
                found.append((f"{pod.name}/{c['name']}", pod, c))
    return found


def hardening_problems(pod: Pod, container: dict[str, Any]) -> list[str]:
    pod_ctx, ctx = pod.spec.get("securityContext", {}), container.get("securityContext", {})
    problems = []
    if {**pod_ctx, **ctx}.get("runAsNonRoot") is not True:
        problems.append("runAsNonRoot")
    uid = {**pod_ctx, **ctx}.get("runAsUser")
    if not isinstance(uid, int) or isinstance(uid, bool) or uid == 0:
        problems.append("a numeric, non-zero runAsUser")  # an image's user by name cannot be checked by the kubelet
    seccomp = ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}
    if seccomp.get("type") != "RuntimeDefault":
        problems.append("seccompProfile RuntimeDefault")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation: false")
    if ctx.get("readOnlyRootFilesystem") is not True:
        problems.append("readOnlyRootFilesystem")
    if ctx.get("capabilities", {}).get("drop") != ["ALL"] or ctx.get("capabilities", {}).get("add"):
        problems.append("capabilities: drop ALL, add none")
    if ctx.get("privileged"):
        problems.append("not privileged")
    return problems


@pytest.mark.parametrize("where", [w for w, _, _ in _hardened_containers()])
def test_labbot_and_ray_containers_are_hardened(where: str) -> None:
    pod, container = next((p, c) for w, p, c in _hardened_containers() if w == where)
    assert hardening_problems(pod, container) == [], where
    if not where.endswith("/autoscaler"):  # KubeRay mounts the autoscaler's /tmp/ray itself
        tmp = [m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
        assert tmp, f"{where}: a read-only root filesystem needs a writable /tmp"
        (volume,) = [v for v in pod.spec["volumes"] if v["name"] == tmp[0]]
        assert "emptyDir" in volume, f"{where}: /tmp is not an emptyDir"


def test_the_hardening_check_has_teeth() -> None:
    pod = PODS["ray-head"]
    (container,) = pod.spec["containers"]
    ctx = container["securityContext"]
    for change in (
        {"readOnlyRootFilesystem": False},
        {"allowPrivilegeEscalation": True},
        {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}},
        {"capabilities": {"drop": ["NET_RAW"]}},
        {"runAsUser": 0},
        {"seccompProfile": {"type": "Unconfined"}},
        {"privileged": True},
    ):
        assert hardening_problems(pod, {**container, "securityContext": {**ctx, **change}}), change
    bare = Pod(pod.name, pod.labels, {**pod.spec, "securityContext": {}}, ray=True)
    assert set(hardening_problems(bare, container)) >= {"runAsNonRoot", "seccompProfile RuntimeDefault"}


def test_no_pod_mounts_a_service_account_token_but_the_autoscaler() -> None:
    for pod in PODS.values():
        assert pod.spec.get("automountServiceAccountToken") is False, pod.name
    # the autoscaler scales the workers through the Kubernetes API: its token is mounted into it alone
    head = PODS["ray-head"]
    projected = {
        v["name"]
        for v in head.spec["volumes"]
        if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
    }
    autoscaler_mounts = {m["name"]: m for m in _autoscaler()["volumeMounts"]}
    (name,) = projected
    assert autoscaler_mounts[name]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    for pod in PODS.values():
        for container in pod.containers:
            assert name not in {m["name"] for m in container.get("volumeMounts", [])}, container["name"]


# ---- NetworkPolicies ------------------------------------------------------------------------------------------------


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@dataclass(frozen=True)
class Source:
    """A pod that opens a connection: its labels and its namespace's."""

    name: str
    labels: dict[str, str]
    namespace: str

    @property
    def namespace_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace}


def _sources() -> list[Source]:
    ns = _namespace()
    return [
        *(Source(p.name, p.labels, ns) for p in PODS.values()),
        Source("a stranger in the namespace", {"app": "something-else"}, ns),
        Source("the ingress controller", {"app.kubernetes.io/name": "ingress-nginx"}, "ingress-nginx"),
        Source("prometheus", {"app.kubernetes.io/name": "prometheus"}, "monitoring"),
        Source("another tenant", {"app.kubernetes.io/name": "labbot"}, "someone-else"),
    ]


def _peer_admits(peer: dict[str, Any], source: Source, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        return False  # the sources here are pods; ipBlock rules are for outside traffic
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], source.namespace_labels):
            return False
    elif source.namespace != policy_ns:
        return False
    return "podSelector" not in peer or _matches(peer["podSelector"], source.labels)


def _port_admits(ports: list[dict[str, Any]] | None, port: int) -> bool:
    if not ports:
        return True
    return any(p.get("port") in (None, port) or (p.get("endPort", -1) >= port >= p.get("port", 0)) for p in ports)


def admitted(target: Pod, port: int, policies: list[dict[str, Any]] | None = None) -> set[str]:
    """Which sources may connect to ``target`` on ``port``, by Kubernetes' rules: a pod some policy selects for
    Ingress accepts only what one of those policies' rules admits; a pod none selects accepts everything."""
    ns = _namespace()
    selecting = [
        p
        for p in (_objects("NetworkPolicy") if policies is None else policies)
        if _matches(p["spec"]["podSelector"], target.labels) and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
    ]
    sources = _sources()
    if not selecting:
        return {s.name for s in sources}
    out = set()
    for source in sources:
        for policy in selecting:
            for rule in policy["spec"].get("ingress", []):
                peers = rule.get("from")
                if (not peers or any(_peer_admits(peer, source, ns) for peer in peers)) and _port_admits(
                    rule.get("ports"), port
                ):
                    out.add(source.name)
    return out


def _container_port(pod: Pod, name: str) -> int:
    ports = {p["name"]: p["containerPort"] for c in pod.spec["containers"] for p in c.get("ports", [])}
    return int(ports[name])


def test_networkpolicies_are_applied_and_deny_by_default() -> None:
    (kustomization,) = _objects("Kustomization")
    assert "networkpolicies.yaml" in kustomization["resources"]
    deny = [
        p
        for p in _objects("NetworkPolicy")
        if p["spec"]["podSelector"] == {} and p["spec"]["policyTypes"] == ["Ingress"] and not p["spec"].get("ingress")
    ]
    assert deny, "no default-deny ingress policy"
    for policy in _objects("NetworkPolicy"):  # each selects a pod the manifests make: a typo'd label selects none
        assert any(_matches(policy["spec"]["podSelector"], p.labels) for p in PODS.values()), policy["metadata"]


def test_only_labbot_reaches_postgresql() -> None:
    postgres = PODS["labbot-postgres"]
    port = _container_port(postgres, "postgres")
    assert admitted(postgres, port) == {"labbot", "labbot-db-upgrade"}
    # the policy named for it selects the postgres pod and no other
    policy = _one("NetworkPolicy", "labbot-postgres")
    assert [p.name for p in PODS.values() if _matches(policy["spec"]["podSelector"], p.labels)] == ["labbot-postgres"]


def test_rays_ports_only_from_ray_and_labbots_jobs_api() -> None:
    assert RAY_PODS
    labbot_uses = 8265  # the Jobs and state APIs: RAY_ADDRESS in labbot-env
    assert f":{labbot_uses}" in _configmap("labbot-env")["RAY_ADDRESS"]
    ray = {p.name for p in RAY_PODS}
    for pod in RAY_PODS:
        for port in (6379, 10001, 52365, 12345):  # GCS, Ray Client, the dashboard agent, a worker's random port
            assert admitted(pod, port) == ray, (pod.name, port)
    head = PODS["ray-head"]
    assert _container_port(head, "dashboard") == labbot_uses
    assert admitted(head, labbot_uses) == ray | {"labbot"}


def test_labbots_http_port_from_the_ingress_controller_prometheus_and_the_jobs() -> None:
    labbot = PODS["labbot"]
    port = _container_port(labbot, "http")
    ray = {p.name for p in RAY_PODS}
    assert admitted(labbot, port) == {"the ingress controller", "prometheus"} | ray  # agents call in process
    assert admitted(labbot, port + 1) == set()  # nothing else of the pod
    annotations = _one("Deployment", "labbot")["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == port  # the scrape is on the admitted port


def test_the_policy_evaluation_has_teeth() -> None:
    """Without the policies everything reaches everything; an open rule admits the stranger; a wrong label, nobody."""
    postgres = PODS["labbot-postgres"]
    assert "a stranger in the namespace" in admitted(postgres, 5432, policies=[])
    policy = yaml.safe_load(yaml.safe_dump(_one("NetworkPolicy", "labbot-postgres")))
    policy["spec"]["ingress"][0]["from"].append({"podSelector": {}})
    assert "a stranger in the namespace" in admitted(postgres, 5432, policies=[policy])
    policy["spec"]["ingress"][0]["from"] = [{"namespaceSelector": {}}]
    assert "another tenant" in admitted(postgres, 5432, policies=[policy])
    policy = yaml.safe_load(yaml.safe_dump(_one("NetworkPolicy", "labbot-postgres")))
    policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"] = {"app.kubernetes.io/name": "labot"}
    assert "labbot" not in admitted(postgres, 5432, policies=[policy])


def test_jobs_egress_misses_the_metadata_service() -> None:
    for pod in RAY_PODS:
        egress = [
            p
            for p in _objects("NetworkPolicy")
            if _matches(p["spec"]["podSelector"], pod.labels) and "Egress" in p["spec"]["policyTypes"]
        ]
        assert egress, f"{pod.name}: no egress policy"
        for address in METADATA_SERVICE:
            ip = ipaddress.ip_address(address)
            for policy in egress:
                for rule in policy["spec"].get("egress", []):
                    for peer in rule.get("to") or [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]:
                        block = peer.get("ipBlock")
                        if block and ip in ipaddress.ip_network(block["cidr"]):
                            excepted = any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
                            assert excepted, f"{pod.name} may reach {address} (the node's cloud credentials)"


# ---- the Ingress ---------------------------------------------------------------------------------------------------


def _ingress_paths() -> list[tuple[str, str]]:
    (ingress,) = _objects("Ingress")
    out = []
    for rule in ingress["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            assert p["backend"]["service"] == {"name": "labbot", "port": {"name": "http"}}, p
            out.append((p["path"], p["pathType"]))
    return out


def published(path: str, paths: list[tuple[str, str]] | None = None) -> bool:
    """Whether the Ingress routes ``path`` (Exact: the same path; Prefix: by whole path elements)."""
    for prefix, kind in _ingress_paths() if paths is None else paths:
        if kind == "Exact" and path == prefix:
            return True
        if kind == "Prefix" and (path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")):
            return True
    return False


def _app_routes() -> set[str]:
    routes = set()
    for path in (ROOT / "bot").rglob("*.py"):
        routes |= set(re.findall(r"""Route\(\s*["']([^"']+)["']""", path.read_text()))
    return routes


def _sample(route: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", route)


_PATH_HELPERS = {"run_path": ("runs",), "page_path": ("pages",), "api_path": ()}


def cli_paths() -> set[str]:
    """Every /api/v1 path the ``labbot`` CLI calls (bot/cli), as a sample path: an id or a value only known at run
    time is ``x1``. Read from the code: the path argument of each ``.json(METHOD, PATH)`` / ``.request(...)`` call,
    and each ``api_path``/``run_path``/``page_path`` it builds one with."""

    def segment(node: ast.expr) -> str:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "x1"

    found = set()
    for source in sorted((ROOT / "bot" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _PATH_HELPERS:
                found.add("/" + "/".join([*_PATH_HELPERS[name], *(segment(a) for a in node.args)]))
            elif name in ("json", "request") and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
                elif isinstance(arg, ast.JoinedStr):
                    found.add("".join(v.value if isinstance(v, ast.Constant) else "x1" for v in arg.values))
    return {"/api/v1" + p for p in found if p.startswith("/")}


def test_the_ingress_publishes_the_listed_paths_each_a_route_of_the_app() -> None:
    paths = _ingress_paths()
    assert set(paths) == INGRESS_PATHS and len(paths) == len(INGRESS_PATHS)
    samples = {_sample(r) for r in _app_routes()}
    for path, kind in paths:
        assert any(published(s, [(path, kind)]) for s in samples), f"{path}: no route of the app there"
    for inside in ("/healthz", "/readyz", "/metrics", "/api/v1/artifacts", "/api/v1/artifacts/x1/share"):
        assert inside in samples and not published(inside), inside
    # Slack's door, and its plot links (the images its servers fetch)
    assert published("/slack/events") and published("/plots/x1/loss.png")


def test_the_ingress_covers_what_the_cli_calls_and_nothing_else() -> None:
    called = cli_paths()
    # the reading has teeth: calls through a literal, an f-string and each path helper
    assert {"/api/v1/jobs", "/api/v1/runs", "/api/v1/runs/x1", "/api/v1/runs/x1/logs"} <= called
    assert {"/api/v1/pages/x1/x1", "/api/v1/evals/runs/x1", "/api/v1/evals/incidents/x1", "/api/v1/ab"} <= called
    for path in sorted(called):
        assert published(path), f"the CLI calls {path}, which the Ingress does not publish"
    for path, kind in _ingress_paths():
        if path.startswith("/api/"):
            assert any(published(c, [(path, kind)]) for c in called), f"{path}: published, but the CLI never calls it"
    # what an Exact path leaves inside: the routes under it the CLI does not call
    assert not published("/api/v1/feedback/x1/comment") and not published("/api/v1/jobs/x1")


def test_jobs_reach_labbot_through_the_service_not_the_ingress() -> None:
    env = _configmap("labbot-env")
    internal = env["LABBOT_INTERNAL_URL"]
    service = _one("Service", "labbot")
    assert re.fullmatch(rf"http://{service['metadata']['name']}\.{_namespace()}\.svc(\.cluster\.local)?", internal)
    assert [p["port"] for p in service["spec"]["ports"]] == [80]  # what a URL without a port reaches
    assert env["LABBOT_PUBLIC_URL"].startswith("https://")
