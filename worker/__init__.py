"""tfk8s's built-in worker: `python -m worker [program args]` runs any role of a TF cluster.

Its __main__ reads TF_CONFIG and dispatches on the task type. The modules, from the bottom layer
up (docs/architecture.md; none imports the launcher):
- `contract`: what every task reads or prints, shared with the launcher (standard library only);
  `exit_cause`: why a task exited, in one line, from what it printed.
- `args`: the program arguments; `context`: TF_CONFIG and the TFK8S_* environment; `program`:
  a training program's interface; `progress`: the progress lines; `metrics`: the Prometheus
  endpoint; `errors`: the failures and their exit codes; `node_faults`: which failures are the
  node's.
- `lifecycle/`: waiting for peers, SIGTERM saves, stopping together, exit; `model_dir/`: the
  layout, its owner, its one writer, whether a checkpoint fits; `keras_check`: Keras 3 where it
  cannot train, caught in a program of your own; `exception_check`: its uncaught exception,
  fatal at once when deterministic.
- `startup/`: the sitecustomize that starts those checks in a --local task (not a package);
  `roles/`: one module per role's work (coordinator, servers, evaluator, the synchronous loops).
- `examples/`: the training programs that ship with the worker.
Importing this package does not import TensorFlow.
"""
