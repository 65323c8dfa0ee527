"""tfk8s's built-in worker: `python -m worker [program args]` runs any role of a TF cluster.

One module per role: ps_server (ps and workers under parameter_server), coordinator (the
parameter_server chief), mwms (multi_worker_mirrored workers), mirrored (one process over local
devices), evaluator (sidecar evaluation). Shared pieces: args (program arguments), context
(TF_CONFIG and TFK8S_* environment), peers (waiting for peers), program (the user program's
interface), layout (the model dir and the FINAL.json marker), training and synchronous (loops),
progress (progress lines), shutdown (exiting without TF's teardown), errors (exit codes).
Importing this package does not import TensorFlow.
"""
