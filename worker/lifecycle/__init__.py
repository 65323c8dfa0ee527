"""A task's life in the cluster: waiting for peers, SIGTERM saves, stopping together, exit."""
