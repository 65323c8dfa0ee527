"""What a TFJob's image runs when its tensorflow container has no command: the image's
ENTRYPOINT and CMD, read from the image on this machine (`docker image inspect`), so that the
written cluster.yaml names the command and tfk8s's supervisor can run it as it runs any other.
No image here (or no docker): None, and the import keeps `command: []` (convert.py says what that
means). The registry is not asked: no credentials are read at import."""

from __future__ import annotations

import json
import shutil
import subprocess

INSPECT_SECONDS = 20
_FORMAT = "{{json .Config.Entrypoint}}\n{{json .Config.Cmd}}"


def local_image_command(image: str) -> tuple[list[str], list[str], str] | None:
    """The image's (ENTRYPOINT, CMD, where read) if docker on this machine has the image, else None."""
    docker = shutil.which("docker")
    if not docker or not image:
        return None
    try:
        done = subprocess.run(
            [docker, "image", "inspect", "--format", _FORMAT, image],
            capture_output=True,
            text=True,
            timeout=INSPECT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        entrypoint, cmd = (json.loads(line) or [] for line in done.stdout.strip().splitlines()[:2])
    except (ValueError, TypeError):
        return None
    if not isinstance(entrypoint, list) or not isinstance(cmd, list):
        return None
    return [str(w) for w in entrypoint], [str(w) for w in cmd], f"`docker image inspect {image}` on this machine"
