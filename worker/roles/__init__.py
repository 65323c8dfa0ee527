"""One module per role's work: the coordinator, servers, evaluator and the synchronous loops."""
