"""TFK8sClient: the Python API over the backends the CLI uses (the CLI is a layer over it).

Named like the Kubeflow SDK's TrainerClient where the meaning is the same: submit (alias
train), get_job, list_jobs, wait_for_job_status, get_job_logs, delete_job; watch() yields
progress events. Errors are the launcher's own (launcher.errors): SpecError carries every
`file:line: field: message (fix)` problem of a spec.
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Union

from launcher.api import sweeps
from launcher.api.config import (
    DEFAULT_WORKDIR,
    BackendConfig,
    KubernetesBackendConfig,
    LocalProcessBackendConfig,
    make_backend,
)
from launcher.api.events import JobEvent
from launcher.backends.base import Backend, View, exit_code
from launcher.cluster_spec import loader
from launcher.cluster_spec.loader import Loaded
from launcher.cluster_spec.spec import SHARED_DISK, ClusterSpec
from launcher.cluster_spec.tfjob import document as tfjob
from launcher.errors import ClusterNotFound, JobFailed, JobTimeout
from launcher.k8s_contract import success_role
from launcher.status.lines import status_line
from launcher.status.status import ClusterStatus, Phase
from launcher.sweep import katib, plot
from launcher.sweep import load as sweep_load

SpecSource = Union[str, Path, dict, ClusterSpec, Loaded, None]
SweepSource = Union[str, Path, dict, sweep_load.LoadedSweep]
EMBEDDED_DEFAULT = "<embedded default>"  # launcher/default-cluster.yaml


def load_spec(spec: SpecSource = None, namespace: str | None = None, *, shared_disk: bool = False) -> ClusterSpec:
    """A validated spec from a file path (a cluster.yaml, or a file of one TFJob, converted as
    `import` does), a mapping, a ClusterSpec, or None (the embedded default spec); `namespace`
    replaces its own. Raises SpecError with every problem found.
    shared_disk: it will run as local processes (see launcher.cluster_spec.spec.SHARED_DISK)."""
    return load_packed(spec, namespace, shared_disk=shared_disk).spec


def load_packed(spec: SpecSource = None, namespace: str | None = None, *, shared_disk: bool = False) -> Loaded:
    """load_spec's spec with its code packed once (loader.Loaded): by its load, or here for a
    ClusterSpec made elsewhere; a Loaded is kept as it is."""
    if spec is None:
        text = resources.files("launcher").joinpath("default-cluster.yaml").read_text()
        loaded = loader.load_text_packed(text, filename=EMBEDDED_DEFAULT, shared_disk=shared_disk)
    elif isinstance(spec, (str, Path)) and tfjob.holds_tfjob(spec):
        loaded = _imported_tfjob(spec, shared_disk)
    elif isinstance(spec, (str, Path)):
        loaded = loader.load_file_packed(spec, shared_disk=shared_disk)
    elif isinstance(spec, dict):
        loaded = loader.load_data_packed(spec, shared_disk=shared_disk)
    elif isinstance(spec, Loaded):
        loaded = spec
    elif isinstance(spec, ClusterSpec):
        loaded = Loaded(spec, loader.pack_code(spec))
    else:
        raise TypeError(f"spec must be a path, a dict or a ClusterSpec, not {type(spec).__name__}")
    if namespace and namespace != loaded.spec.namespace:
        data = loaded.spec.model_dump(by_alias=True)
        data["namespace"] = namespace
        loaded = Loaded(ClusterSpec.model_validate(data, context={SHARED_DISK: shared_disk}), loaded.code)
    return loaded


def _imported_tfjob(path: str | Path, shared_disk: bool) -> Loaded:
    """The one TFJob of the file as `import` converts it, its notes INFO records of tfk8s.spec."""
    loaded, notes = tfjob.load_one_packed(path, shared_disk=shared_disk)
    for note in notes:
        logging.getLogger("tfk8s.spec").info(f"note: {note}")
    return loaded


def import_tfjob(path: str | Path) -> list[tfjob.Imported]:
    """Each kubeflow.org/v1 TFJob of the file as a cluster.yaml (`text`, with a comment above
    every key whose meaning changed) and its `notes`; SpecError with each field that cannot be
    mapped, at its line (docs/migrating-from-tfjob.md)."""
    return tfjob.import_file(path)


def import_experiment(path: str | Path) -> katib.ImportedSweep:
    """A Katib Experiment (kubeflow.org/v1beta1) whose trial is a TFJob as a sweep.yaml (`text`,
    the trial's cluster inline) and its `notes`; SpecError with each field that cannot be mapped,
    at its line (docs/sweeps.md#katib-experiments)."""
    return katib.import_file(path)


holds_experiment = katib.holds_experiment_file


class TFK8sClient:
    """Submit, follow, inspect and delete training clusters on one backend.

        client = TFK8sClient(LocalProcessBackendConfig(workdir=".tfk8s"))
        name = client.submit("examples/ps.yaml")
        for event in client.watch(name):
            print(event.step, event.loss, event.eta_seconds)

    backend_config: KubernetesBackendConfig (the default: kubectl's current context) or
    LocalProcessBackendConfig. view and out are for the CLI: what follow() shows, and where
    the backends write their notes (default: INFO records of the loggers `tfk8s.kubernetes`
    and `tfk8s.local`; the client prints nothing)."""

    def __init__(
        self, backend_config: BackendConfig | None = None, *, view: View | None = None, out: IO[str] | None = None
    ):
        self.config = backend_config if backend_config is not None else KubernetesBackendConfig()
        if not isinstance(self.config, (KubernetesBackendConfig, LocalProcessBackendConfig)):
            raise TypeError(
                "backend_config must be KubernetesBackendConfig or "
                f"LocalProcessBackendConfig, not {type(self.config).__name__}"
            )
        self._view, self._out = view, out
        self._backends: dict[str | None, Backend] = {}
        self._namespaces: dict[str, str] = {}  # Kubernetes: job name -> where it was submitted

    @property
    def local(self) -> bool:
        return isinstance(self.config, LocalProcessBackendConfig)

    def locate(self, name: str, namespace: str | None) -> None:
        """Kubernetes: job `name` is in `namespace` (submitted by another launcher: a sweep's
        trials), where get_job and delete_job look for it."""
        if namespace and not self.local:
            self._namespaces[name] = namespace

    def backend(self, name: str | None = None) -> Backend:
        """The backend (created on first use) for job `name`: on Kubernetes, one per namespace,
        so a job submitted to its spec's namespace is found there again."""
        namespace = None if self.local else self._namespaces.get(name or "")
        if namespace not in self._backends:
            self._backends[namespace] = make_backend(self.config, view=self._view, out=self._out, namespace=namespace)
        return self._backends[namespace]

    # --- jobs ------------------------------------------------------------------------------

    def load(self, spec: SpecSource = None) -> ClusterSpec:
        """The spec as submit() would run it (validated; the config's namespace applied)."""
        return self.load_packed(spec).spec

    import_tfjob = staticmethod(import_tfjob)

    def load_packed(self, spec: SpecSource = None) -> Loaded:
        """load() with the spec's code packed once (loader.Loaded), which submit() then ships."""
        namespace = None if self.local else self.config.namespace
        return load_packed(spec, namespace, shared_disk=self.local)

    def submit(self, spec: SpecSource = None, *, replace: bool = False) -> str:
        """Create the cluster of `spec` (see load_spec; None: the embedded default) and return
        its name. A no-op when the same spec already runs; SubmitRefused for a different one
        unless `replace`. Locally the tasks start now, under a detached supervisor (with
        foreground=True: under a thread of this process, so they end with it)."""
        loaded = self.load_packed(spec)  # the code packed once: the submit ships what the load checked
        spec = loaded.spec
        if not self.local:
            self._namespaces[spec.name] = spec.namespace
        self.backend(spec.name).submit(spec, replace=replace, code=loaded.code)
        return spec.name

    train = submit  # the Kubeflow SDK's name

    def get_job(self, name: str) -> ClusterStatus:
        """Phase, per-role counts, training progress; ClusterNotFound if there is none."""
        return self.backend(name).status(name)

    def list_jobs(self) -> list[ClusterStatus]:
        return self.backend().list()

    def delete_job(self, name: str) -> None:
        """Stop the cluster and remove its objects (locally: all but model/ and mounts/); returns once
        everything is gone."""
        self.backend(name).delete(name)

    def get_job_logs(
        self, name: str, role: str | None = None, index: int = 0, *, follow: bool = False, tail: int | None = None
    ) -> Iterator[str]:
        """Lines of one task's log (role, index), or with role None every task's, each behind
        `[<role>-<index>] `. follow: until the task (or cluster) ends, waiting for a task
        that has not started and going on with a restarted task's new log. tail: only the
        last lines of each log."""
        backend = self.backend(name)
        if role is None:
            return backend.all_logs(name, follow=follow, tail=tail)
        return backend.logs(name, role, index, follow=follow, tail=tail)

    def tensorboard(self, name: str, port: int = 6006) -> AbstractContextManager[str]:
        """TensorBoard on the job's model dir at 127.0.0.1:port while the context is open
        (its value: the URL)."""
        return self.backend(name).tensorboard(name, port)

    # --- waiting ---------------------------------------------------------------------------

    def watch(
        self, name: str, *, polling_interval: float | None = None, timeout: float | None = None
    ) -> Iterator[JobEvent]:
        """A JobEvent whenever the job's phase, tasks, message or training progress (step,
        loss, ETA, evaluation) changes, ending with the one in which it finished (or became
        Unknown). JobTimeout after `timeout` seconds."""
        interval = polling_interval or (1.0 if self.local else 2.0)
        deadline = None if timeout is None else time.monotonic() + timeout
        backend, shown = self.backend(name), None
        while True:
            status = backend.status(name)
            line = status_line(status)
            if line != shown:
                shown = line
                yield JobEvent(status)
            if status.finished or status.phase is Phase.UNKNOWN:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(f"job {name!r} is still {status.phase} after {timeout:g}s: {line}", status)
            time.sleep(interval)

    def wait_for_job_status(
        self,
        name: str,
        status: Iterable[Phase | str] = (Phase.SUCCEEDED,),
        *,
        timeout: float | None = None,
        polling_interval: float | None = None,
        callback: Callable[[JobEvent], Any] | None = None,
    ) -> ClusterStatus:
        """Block until the job is in one of `status` (phases or their names) and return its
        status; `callback` gets every JobEvent meanwhile. JobFailed when it ends in another
        phase (Failed; Unknown: nobody runs it any more), JobTimeout after `timeout` s."""
        wanted = {Phase(s) for s in status}
        event = None
        for event in self.watch(name, polling_interval=polling_interval, timeout=timeout):
            if callback is not None:
                callback(event)
            if event.phase in wanted:
                return event.status
        last = event.status
        raise JobFailed(
            f"job {name!r} ended {last.phase}"
            + (f" (exit code {last.exit_code})" if last.exit_code else "")
            + (f": {last.message}" if last.message else ""),
            last,
            exit_code(last),
        )

    def follow(self, name: str) -> int:
        """The CLI's `submit --wait` / `status --watch`: block until the job ends, showing it
        in the client's view, and return the CLI exit code (the chief's). In a foreground local
        config, Ctrl-C or SIGTERM meanwhile stops every task."""
        return self.backend(name).wait(name)

    # --- sweeps (docs/sweeps.md) -----------------------------------------------------------

    def load_sweep(self, sweep: SweepSource) -> sweep_load.LoadedSweep:
        """A validated sweep (a sweep.yaml path, or a mapping) and its base cluster spec;
        SpecError with every problem, at its file:line."""
        if isinstance(sweep, sweep_load.LoadedSweep):
            return sweep
        if isinstance(sweep, dict):
            return sweep_load.load_data(sweep, shared_disk=self.local)
        return sweep_load.load_file(sweep, shared_disk=self.local)

    def sweep_dir(self, name: str) -> Path:
        """Where the sweep's files are: `<workdir>/.sweeps/<name>` (on Kubernetes too: the
        machine that runs the sweep keeps them, under the default workdir)."""
        workdir = self.config.workdir if self.local else DEFAULT_WORKDIR
        return sweeps.sweep_dir(workdir, name)

    def sweep(
        self,
        sweep: SweepSource,
        *,
        on_event: Callable[[str], Any] | None = None,
        poll_seconds: float | None = None,
    ) -> sweeps.SweepStatus:
        """Run the sweep until it ends: each trial a cluster `<sweep>-t<N>` submitted here,
        `parallelTrials` at a time; returns its status (the best trial marked). Rerun on a
        sweep that exists, it resumes (SubmitRefused if its file changed). on_event gets a
        line per trial submitted or ended. Locally the trials run under detached supervisors
        unless the config is foreground, so they outlive an interrupted sweep."""
        loaded = self.load_sweep(sweep)
        backend = {"local": self.local}
        if self.local:
            backend["workdir"] = str(self.config.resolved_workdir)
        else:
            backend.update(namespace=self.config.namespace, context=self.config.context)
        run = sweeps.SweepRun(
            self,
            loaded,
            self.sweep_dir(loaded.sweep.name),
            backend=backend,
            on_event=on_event,
            poll_seconds=poll_seconds,
        )
        return run.run()

    def sweep_status(self, name: str) -> sweeps.SweepStatus:
        """Each trial: its values, phase, objective value (a running one's latest evaluation),
        its cause if it failed; the best marked. ClusterNotFound if there is no such sweep."""
        return sweeps.sweep_status(self, self.sweep_dir(name))

    def sweep_plot(self, name: str) -> str:
        """The sweep as an HTML page: the objective by trial and by each parameter (SVG, no
        script), the best marked, each point's trial in its tooltip."""
        status = self.sweep_status(name)  # raises ClusterNotFound for no such sweep
        return plot.page(status, plot.log_scales(sweeps.SweepFiles(self.sweep_dir(name)).sweep()))

    def sweep_logs(
        self, name: str, role: str | None = None, index: int = 0, *, tail: int | None = None
    ) -> Iterator[str]:
        """Each submitted trial's log lines (get_job_logs of its cluster; role None: the task
        that decides a training, the chief or MWMS worker 0), after a line that names the trial,
        its values and phase; a trial whose cluster is gone says so."""
        files = sweeps.SweepFiles(self.sweep_dir(name))
        status = self.sweep_status(name)  # raises ClusterNotFound for no such sweep
        role = role or success_role(files.record()["base"]["strategy"]).value
        for row in status.trials:
            if row.cluster is None:
                continue
            values = " ".join(f"{k}={v}" for k, v in row.values.items())
            yield f"==> {row.cluster} ({values}) {row.phase}: {role}-{index} <==\n"
            try:
                yield from self.get_job_logs(row.cluster, role, index, tail=tail)
            except ClusterNotFound:
                yield f"(no log: cluster {row.cluster} is gone)\n"

    def delete_sweep(self, name: str) -> list[str]:
        """Stop the launcher that runs the sweep, delete its trials' clusters and its files;
        returns the clusters deleted."""
        return sweeps.delete_sweep(self, self.sweep_dir(name))

    def sweep_trials(self, sweep: SweepSource, count: int) -> list[ClusterSpec]:
        """The first `count` trials' clusters, as the sweep would start them (nothing kept)."""
        return sweeps.first_trials(self.load_sweep(sweep), count, shared_disk=self.local)
