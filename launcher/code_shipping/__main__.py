"""`python -m launcher.code_shipping DIR [--exclude PATTERN ...]`: a code dir's archive in base64,
for `helm install --set-file codeArchive=`; refused in one line when Helm could not keep it."""

from __future__ import annotations

import argparse
import base64
import sys

from launcher.chart import helm_release
from launcher.code_shipping import code_bundle
from launcher.code_shipping.code_files import Unshippable


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m launcher.code_shipping", description="print a code dir's archive in base64 (for Helm)"
    )
    p.add_argument("dir")
    p.add_argument("--exclude", action="append", default=[])
    args = p.parse_args(argv)
    try:
        bundle = code_bundle.pack_checked(args.dir, args.exclude, args.dir)
        helm_release.check_archive(bundle.archive, f"{args.dir} ({code_bundle.human(bundle.size)} packed)")
    except code_bundle.TooLarge as exc:
        print(f"code: {exc} ({exc.hint})", file=sys.stderr)
        return 2
    except (Unshippable, ValueError, OSError) as exc:
        print(f"code: {exc}", file=sys.stderr)
        return 2
    except helm_release.TooLargeForHelm as exc:
        print(f"code: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dir}: {bundle.summary()}", file=sys.stderr)
    sys.stdout.write(base64.b64encode(bundle.archive).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
