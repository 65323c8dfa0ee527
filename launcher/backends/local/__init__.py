"""Run a cluster spec as local processes: every task on 127.0.0.1, same rules as on Kubernetes.

Each task gets the command, environment and TF_CONFIG of its pod from the plan
(launcher.plan.plan), $(VAR) references expanded as the kubelet does (tasks.py), with a
127.0.0.1 port per training task that the run holds until it ends
(ports.py). The end-of-job rules match the Kubernetes backend; they are pure functions in policy.py:
- success: the chief (MWMS: worker 0) exits 0 and the evaluator, if any, has evaluated the final
  checkpoint: the built-in evaluator exits 0 by itself once it has; a bring-your-own evaluator
  is stopped `evaluatorGraceSeconds` after training ended (MWMS: the other workers get
  PEER_EXIT_GRACE_SECONDS to finish after worker 0). Meanwhile the phase is Finishing. Then ps
  and PS workers, which never exit, are stopped (SIGTERM, then SIGKILL after a grace) and count
  as succeeded.
- restarts (policy.restart_decision, the plan's FailurePolicy): a task that exits non-zero (or
  is killed) is started again with the same TF_CONFIG, up to `backoffLimit` times per role,
  counted over all of the role's tasks (like one Kubernetes Job per role): in place under
  restartPolicy OnFailure, as a replaced pod under Never. Under Never the Jobs'
  podFailurePolicy applies too: a task preempted by SIGTERM (exit EXIT_PREEMPTED, 143, after
  the built-in worker saved a checkpoint) is replaced without counting, and a configuration
  error of the built-in worker (exit EXIT_CONFIG, 2) fails its role at once (retrying a bad
  argument cannot help).
- failure (policy.decide): a training task (chief, worker, ps) that failed and may not restart
  fails the cluster; the chief first gets FAILURE_GRACE_SECONDS to notice and exit with its own
  error. Every other task, the evaluator included, is then stopped at once (on Kubernetes, by
  the supervisor in its pod). An evaluator failure never fails training: it is reported in the
  status message.
- stopping a task (runner.stop): SIGTERM to its process group, SIGKILL after the spec's
  terminationGracePeriodSeconds (as the kubelet does), unless the backend was given its own
  stop_grace_seconds; a second Ctrl-C (SIGTERM, SIGHUP) SIGKILLs the tasks still stopping at
  once, and the supervisor names the tasks that ignored SIGTERM.
- nothing outlives the run: each task runs in its own process group, and every group is ended on
  success, failure, Ctrl-C, SIGTERM and SIGHUP (a closed terminal). On Linux, tasks also get SIGKILL if the supervising
  thread dies without cleaning up (PR_SET_PDEATHSIG), e.g. when the launcher is SIGKILLed.

submit() starts the tasks and returns; wait() waits for the end (types.py has the options). In
the foreground (the CLI's) a thread of this process supervises them (foreground.py), and wait()
passes Ctrl-C, SIGTERM and SIGHUP on to it; otherwise (the API's default) submit() starts a detached
`python -m launcher.backends.local supervise` process and wait() polls its status.

Files, under `<workdir>/<name>/` (files.py):
    spec.json                 the submitted spec
    status.json               phase, per-task state and exit codes, and the pid of the process
                              supervising the run (the CLI itself in the foreground), kept up
                              to date
    supervisor.log            output of a detached supervisor (foreground=False)
    pids/<role>-<index>.pid   each running task's pid (tests inject faults with it)
    logs/<role>-<index>.log   each task's output, all attempts, each behind a header line
    model/                    the model dir (TFK8S_MODEL_DIR), unless checkpoint.dir is gs://;
                              its OWNER.json names this cluster (worker/model_dir/ownership.py)
    mounts/<path>/            each pod mount path (checkpoint.volume's, roles' volumeMounts) as a
                              dir of the run: args and env values under it name it (tasks.py)
    submit.lock               locked by the submit that checks and starts the run, one at a
                              time; it holds that submit's pid
`delete` stops a running cluster and removes everything but `model/` and `mounts/` (and `submit.lock`),
which, like a PersistentVolumeClaim on Kubernetes, outlive the cluster: a resubmitted spec resumes from its
checkpoints. Remove them by hand to start from scratch. It says what it removed and kept.
"""

from launcher.backends.local.types import DEFAULT_WORKDIR, LocalProcessBackendConfig

__all__ = ["LocalBackend", "LocalProcessBackendConfig", "DEFAULT_WORKDIR"]


def __getattr__(attribute: str):
    # The backend class is imported on first use, so importing the options (types.py) through
    # this package, as launcher.api does, loads none of the backend's modules.
    if attribute == "LocalBackend":
        from launcher.backends.local.backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
