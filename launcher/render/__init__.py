"""plan -> Kubernetes objects: the manifests/*.j2 templates filled from the plan (pure)."""
