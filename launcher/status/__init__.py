"""Kubernetes objects -> a cluster's status: phase, causes, progress (pure readers)."""
