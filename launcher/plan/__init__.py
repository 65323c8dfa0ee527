"""spec -> plan: every name and rule a task gets, decided once (pure). Where a task is reached
(Kubernetes DNS names, local 127.0.0.1 ports) is the backend's: render/tfconfig.py, backends/local/."""
