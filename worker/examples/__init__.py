"""Training programs that ship with the worker (see worker/program.py for the interface)."""
