"""A bring-your-own `command:` script (python run.py) that imports its sibling package."""

import os

from mylib.marker import MARKER

print(f"tfk8s-code-marker {MARKER} cwd={os.getcwd()}", flush=True)
