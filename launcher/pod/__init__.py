"""What runs inside the cluster's pods beside the task (stdlib only): the supervisor, the job watch."""
