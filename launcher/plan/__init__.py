"""spec -> plan: every name, address and rule a task gets, decided once (pure)."""
