"""The Ray benchmark's tiny training entry (bench/ray_cluster.py), run by the driver wrapper in
the head as the RLinf template runs RLinf's: it joins the Ray cluster the wrapper waited for,
runs one task pinned to each alive node (so the worker truly serves the run), and prints
RLinf's reasoning runner's tqdm `Global Step` bar, one step a second, which the wrapper turns
into progress signals. It reads only `runner.max_steps=N` of the Hydra overrides it is given.

Runs in the Ray virtualenv (var/bench/ray-venv), never in the console's.
"""

from __future__ import annotations

import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

STEP_SECONDS = 1.0


@ray.remote(num_cpus=1)
def node_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


def steps(argv: list[str]) -> int:
    for word in argv:
        if word.startswith("runner.max_steps="):
            return int(word.partition("=")[2])
    return 5


def bar(step: int, total: int) -> str:
    done = step * 10 // total
    rate = f"{STEP_SECONDS:.2f}s/it"
    return (
        f"Global Step: {100 * step // total:3d}%|{'█' * done}{' ' * (10 - done)}| "
        f"{step}/{total} [00:{step:02d}<00:{total - step:02d}, {rate}, reward={step / total:.2f}]"
    )


def main() -> int:
    ray.init(address="auto", logging_level="WARNING")
    alive = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    pinned = [
        node_id.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        for node in alive
    ]
    ran = set(ray.get([task.remote() for task in pinned], timeout=120))
    print(f"bench entry: tasks ran on {len(ran)} of {len(alive)} alive nodes", flush=True)
    total = steps(sys.argv[1:])
    for step in range(1, total + 1):
        time.sleep(STEP_SECONDS)
        print(bar(step, total), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
