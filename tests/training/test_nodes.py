"""A cluster's nodes as labbot reads them (Ray's state API), what a run needs of one node, and the custom resources a
launch asks for (pure)."""

from __future__ import annotations

import pytest

from labbot.common.errors import BadRequest
from labbot.training.launcher import RayNode, nodes_of, sum_resources
from labbot.training.registry import JobRegistry
from labbot.training.service import fits_a_node, need_words, node_need
from labbot.training.specs import LaunchRequest, check_resources, resolve_launch


def _doc(*nodes: dict[str, object]) -> dict[str, object]:
    return {"result": True, "data": {"result": {"result": list(nodes), "total": len(nodes)}}}


def test_nodes_from_the_state_api_alive_and_dead() -> None:
    doc = _doc(
        {"node_id": "a" * 56, "node_name": "10.0.0.7", "state": "ALIVE", "is_head_node": True,
         "resources_total": {"memory": 1e9, "node:10.0.0.7": 1.0}},
        {"node_id": "b" * 56, "node_name": "10.0.0.8", "state": "ALIVE",
         "resources_total": {"CPU": 1, "accelerator": 1, "bogus": "x", "flag": True}},
        {"node_id": "c" * 56, "node_ip": "10.0.0.9", "state": "DEAD", "state_message": "health check failed",
         "resources_total": {"CPU": 4}},
        "not a node",
    )  # fmt: skip
    head, worker, dead = nodes_of(doc)
    assert head.is_head and head.alive and head.words() == "10.0.0.7 (node aaaaaaaa)"
    assert worker.resources == {"CPU": 1.0, "accelerator": 1.0}  # what is not a number is left out
    assert not dead.alive and dead.name == "10.0.0.9" and dead.state_message == "health check failed"
    assert sum_resources([head, worker, dead]) == {"memory": 1e9, "node:10.0.0.7": 1.0, "CPU": 1.0, "accelerator": 1.0}
    assert nodes_of({"data": None}) == [] and nodes_of([]) == []


def test_a_run_must_fit_one_node_not_the_sum() -> None:
    a = RayNode("a", "n1", True, False, {"CPU": 1.0, "accelerator": 1.0})
    b = RayNode("b", "n2", True, False, {"CPU": 1.0})
    dead = RayNode("c", "n3", False, False, {"CPU": 8.0, "accelerator": 4.0})
    need = node_need({"cpus": 2, "resources": {"accelerator": 1}})
    assert need == {"CPU": 2.0, "accelerator": 1.0}
    assert not fits_a_node([a, b, dead], need), "2 CPUs in all, but no node has 2; the dead one counts for nothing"
    assert fits_a_node([a, b], node_need({"cpus": 1, "resources": {"accelerator": 1}}))
    assert fits_a_node([b], node_need({})) and not fits_a_node([], node_need({}))
    assert need_words(need) == "a node with 2 CPUs and accelerator=1"
    assert need_words(node_need({"gpus": 1})) == "a node with 1 GPU"
    assert need_words({}) == "any alive node"


def test_custom_resources_are_checked_and_merged_over_the_jobs() -> None:
    assert check_resources({"accelerator": "1", "ssd/fast": 0.5}, "--resources") == {
        "accelerator": 1.0,
        "ssd/fast": 0.5,
    }
    for bad, said in [
        ({"CPU": 1}, "use cpus / --cpus"),
        ({"memory": 1}, "Ray sets it for each node"),
        ({"1gpu": 1}, "is not a resource name"),
        ({"accelerator": -1}, "must be a number of at least 0"),
        ({"accelerator": "lots"}, "accelerator='lots' must be a number"),
        ({"accelerator": float("nan")}, "must be a number"),
        ([1], "must be a table"),
    ]:
        with pytest.raises(BadRequest) as e:
            check_resources(bad, "--resources")
        assert said in e.value.message, e.value.message
    registry = JobRegistry.from_config(
        {"gpu-ish": {"entrypoint": "sleep 1", "description": "d", "resources": {"accelerator": 1, "ssd": 1}}}
    )
    spec = registry.get("gpu-ish")
    cfg = resolve_launch(spec, LaunchRequest(job="gpu-ish", resources={"accelerator": "2", "ssd": 0}))
    assert cfg.resources == {"accelerator": 2.0}  # the launch's over the job's; 0 drops one
    with pytest.raises(Exception, match="GPU is not a custom resource"):
        JobRegistry.from_config({"x": {"entrypoint": "sleep 1", "description": "d", "resources": {"GPU": 1}}})
