"""Write docs/spec.md's key table from the spec model's field descriptions
(scripts/spec_reference.py); tests/test_docs.py fails while it is stale.

    python scripts/gen_spec_reference.py --write
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts import spec_reference as reference  # noqa: E402

DOC = REPO / "docs" / "spec.md"


def main(argv: list[str]) -> int:
    current = DOC.read_text()
    fresh = reference.replace_in(current)
    if "--write" in argv:
        DOC.write_text(fresh)
        return 0
    if fresh != current:
        print(f"{DOC} is stale: python scripts/gen_spec_reference.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
