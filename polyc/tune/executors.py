"""Where candidates are measured: a local worker process (default) or the nodes of a Ray cluster.

Both give *channels* with the same two calls (`call(request, timeout)`, `restart()`), each a
worker that holds the kernel and measures with a fixed thread count on its own cores; a batch is
split across channels and every channel measures its share interleaved with its own baseline
(`measure.measure_batch`), so ratios never compare times taken on different nodes.  Records are
written centrally, by the process that runs the search.

Ray: `pc.tune(k, sizes, executor="ray")` calls `ray.init()` unless Ray is initialised already,
so `RAY_ADDRESS=ray://head:10001` (or `ray.init(address=...)` before tuning) points it at a
cluster; one actor per node (`ray_nodes=` of them, default every alive node), each reserving
`threads` CPUs.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import TuneError
from .measure import LocalChannel, Measurement, Task, WorkerLost, measure_batch


class RayChannel:
    """A worker that is a Ray actor (on some node of the cluster)."""

    def __init__(self, task: Task, node: Optional[str] = None):
        self.task, self.node = task, node
        self.actor: Any = None
        self.start()

    def start(self) -> None:
        import ray
        from .measure import thread_env
        options: Dict[str, Any] = {"num_cpus": self.task.threads,
                                   "runtime_env": {"env_vars": thread_env(self.task.threads)}}
        if self.node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node, soft=True)
        self.actor = _ray_actor_class().options(**options).remote(self.task)
        try:
            ray.get(self.actor.ready.remote(), timeout=300)
        except Exception as e:  # noqa: BLE001 - a Ray failure to start is the user's to see
            raise TuneError(f"a Ray tuning worker could not start: {e}") from e

    def call(self, request: Tuple[Any, ...], timeout: float) -> Dict[str, Any]:
        import ray
        try:
            return ray.get(self.actor.handle.remote(request), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            ray.kill(self.actor)
            raise WorkerLost(f"no answer within {timeout:.0f} s") from None
        except ray.exceptions.RayActorError as e:
            raise WorkerLost(f"the Ray worker died ({type(e).__name__})") from None

    def restart(self) -> None:
        import ray
        try:
            ray.kill(self.actor)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.start()

    def close(self) -> None:
        import ray
        try:
            ray.kill(self.actor)
        except Exception:  # noqa: BLE001
            pass


_ACTOR: Any = None


def _ray_actor_class() -> Any:
    global _ACTOR
    if _ACTOR is None:
        import ray
        from .measure import WorkerState

        @ray.remote(max_restarts=0)
        class TuneWorker:
            def __init__(self, task: Task):
                self.state = WorkerState(task)

            def ready(self) -> bool:
                return True

            def handle(self, request):
                return self.state.handle(request)

        _ACTOR = TuneWorker
    return _ACTOR


def make_channels(executor: Optional[str], task: Task, workers: int = 1, ray_nodes: Optional[int] = None) -> List[Any]:
    """Channels for `executor`: None/"local" (`workers` local processes, cores split between them)
    or "ray" (one actor per Ray node)."""
    if executor in (None, "local", "process"):
        from ..target import host_cpus
        cores = list(host_cpus())
        per = max(1, len(cores) // workers) if cores else 0
        return [LocalChannel(task, tuple(cores[k * per:(k + 1) * per]) if per and workers > 1 else None)
                for k in range(workers)]
    if executor == "ray":
        try:
            import ray
        except ImportError:
            raise TuneError("executor='ray' needs Ray: pip install 'polyc[ray]'") from None
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, log_to_driver=False)
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        nodes = nodes[:ray_nodes] if ray_nodes else nodes
        return [RayChannel(task, node) for node in nodes or [None]]
    raise TuneError(f"unknown executor {executor!r}; use None (local processes) or 'ray'")


def measure_on(channels: Sequence[Any], baseline: Tuple[str, Dict[str, Any]],
               batch: Sequence[Tuple[str, Dict[str, Any]]], rounds: int, min_s: float) -> List[Measurement]:
    """Split `batch` over `channels`; each measures its share with its own baseline, in parallel."""
    shares = [list(batch[k::len(channels)]) for k in range(len(channels))]
    jobs = [(ch, share) for ch, share in zip(channels, shares) if share]
    if len(jobs) == 1:
        ch, share = jobs[0]
        return measure_batch(ch, baseline, share, rounds, min_s)
    with ThreadPoolExecutor(len(jobs)) as pool:
        parts = list(pool.map(lambda job: measure_batch(job[0], baseline, job[1], rounds, min_s), jobs))
    out: List[Measurement] = []
    for part in parts:
        out.extend(m for m in part[1:])
    out.insert(0, parts[0][0])
    return out
