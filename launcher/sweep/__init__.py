"""Hyperparameter sweeps (pure): the sweep.yaml model and its loader, the trials' cluster specs,
the search (grid, random, TPE, median stopping: Optuna, its study in a journal file), a Katib
Experiment's conversion. The loop that submits and follows trials is launcher/api/sweeps.py."""
