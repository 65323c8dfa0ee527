"""The cluster spec: cluster.yaml's pydantic model, its loader, and the rules checked on it at load."""
