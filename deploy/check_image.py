"""Builds the Dockerfile's image without a container engine, and runs it: `make image-check`.

Each instruction of the Dockerfile is carried out in a scratch directory that stands for the
image's file system: COPY copies from the build context (what .dockerignore leaves) or from the
build stage, ENV and WORKDIR apply, and RUN runs its command with the image's absolute paths
moved under the scratch directory and `python` being this machine's Python 3.12 (the base
image's version). The runtime stage's RUN, which creates the unprivileged user, is the one step
left out: it would create a user on this machine. Then the image's command is started with the
image's environment, the migrations run first, and the web process must answer /healthz,
/readyz, a page, its hashed static files (whitenoise) and /metrics.

Usage: python deploy/check_image.py   (exit status 0 when the image built and answered)
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE_PATHS = ("/opt/venv", "/app", "/build", "/tmp/prometheus", "/var/lib/trainyard")
IMAGE_PATH = re.compile(
    r"(?<![^\s=:])(" + "|".join(re.escape(path) for path in IMAGE_PATHS) + r")(?![\w.-])"
)
USER_SETUP = ("groupadd", "useradd", "install -d")  # the runtime stage's only RUN


class Image:
    def __init__(self, scratch: Path) -> None:
        self.root = scratch / "image"
        self.context = scratch / "context"
        self.env: dict[str, str] = {}
        self.workdir = "/"
        self.cmd: list[str] = []

    def path(self, image_path: str) -> Path:
        return self.root / image_path.lstrip("/")

    def moved(self, text: str) -> str:
        """The image's absolute paths in `text` (a word, or after `=` or `:`), moved under the
        scratch root, in one pass."""
        return IMAGE_PATH.sub(lambda found: str(self.path(found[0])), text)


def context_files(context: Path) -> None:
    """The build context: the repository's files less what .dockerignore names."""
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    for name in listed:
        parts = Path(name).parts
        if any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(parts[0], p) for p in ignored):
            continue
        if any(fnmatch.fnmatch(name, p.removeprefix("**/")) for p in ignored if "**" in p):
            continue
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    joined = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def copy(image: Image, arguments: str, stages: dict[str, Path]) -> None:
    words = arguments.split()
    source_root = image.context
    if words[0].startswith("--from="):
        source_root = stages[words.pop(0).removeprefix("--from=")]
    *sources, target = words
    for source in sources:
        origin = source_root / source.lstrip("/") if source != "." else source_root
        destination = image.path(target)
        if origin.is_dir():
            shutil.copytree(origin, destination, dirs_exist_ok=True, symlinks=True)
        else:
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, destination / origin.name)


def run(image: Image, command: str, python: Path) -> None:
    if command.startswith(USER_SETUP):
        print(f"  (left out: {command[:60]}...)")
        return
    tools = image.root.parent / "tools"
    tools.mkdir(exist_ok=True)
    if not (tools / "python").exists():
        (tools / "python").symlink_to(python)
    env = os.environ | {k: image.moved(v) for k, v in image.env.items()}
    env["PATH"] = f"{tools}:{env['PATH']}"
    cwd = image.path(image.workdir)
    cwd.mkdir(parents=True, exist_ok=True)
    subprocess.run(["sh", "-c", image.moved(command)], env=env, cwd=cwd, check=True)


def build(scratch: Path, python: Path) -> Image:
    stages: dict[str, Path] = {}
    image = Image(scratch)
    image.context.mkdir(parents=True)
    context_files(image.context)
    for instruction, arguments in instructions():
        started = time.monotonic()
        if instruction == "FROM":
            _base, _, name = arguments.partition(" AS ")
            image.root = scratch / name.strip()
            image.root.mkdir()
            image.env, image.workdir = {}, "/"
            stages[name.strip()] = image.root
        elif instruction == "COPY":
            copy(image, arguments, stages)
        elif instruction == "ENV":
            for pair in shlex.split(arguments):
                name, _, value = pair.partition("=")
                image.env[name] = value
        elif instruction == "WORKDIR":
            image.workdir = arguments
        elif instruction == "RUN":
            run(image, arguments, python)
        elif instruction == "CMD":
            image.cmd = json.loads(arguments)
        print(f"{instruction} {arguments[:70]}  ({time.monotonic() - started:.1f}s)", flush=True)
    return image


def answer(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def serve(image: Image) -> None:
    """The image's command, with its environment, on a free port; then the checks."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: image.moved(v) for k, v in image.env.items()}
    env |= {
        "PATH": f"{image.path('/opt/venv')}/bin:/usr/bin:/bin",
        "TRAINYARD_SECRET_KEY": "image-check",
        "TRAINYARD_FIELD_KEYS": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        # plain HTTP on loopback, as behind a proxy that ends TLS
        "TRAINYARD_SECURE_SSL_REDIRECT": "false",
        "TRAINYARD_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{port} --workers 2",
    }
    image.path("/var/lib/trainyard").mkdir(parents=True, exist_ok=True)
    app = image.path("/app")
    manage = [str(image.path("/opt/venv") / "bin" / "python"), "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=env, cwd=app, check=True)
    web = subprocess.Popen(image.cmd, env=env, cwd=app, start_new_session=True)
    try:
        check(f"http://127.0.0.1:{port}")
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=30)


def check(base: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _, body = answer(f"{base}/healthz")
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert (status, body) == (200, b"ok\n"), (status, body)
    status, _, body = answer(f"{base}/readyz")
    assert status == 200 and json.loads(body) == {"database": "ok", "broker": "ok"}, body
    status, _, page = answer(f"{base}/accounts/login/")
    assert status == 200, status
    stylesheet = page.decode().split('href="/static/', 1)[1].split('"', 1)[0]
    assert stylesheet.count(".") >= 2, stylesheet  # a hashed name: app.<hash>.css
    status, headers, _ = answer(f"{base}/static/{stylesheet}")
    assert status == 200 and "immutable" in headers.get("Cache-Control", ""), headers
    status, _, metrics = answer(f"{base}/metrics")
    assert status == 200 and b"trainyard_http_request_duration_seconds_count{" in metrics
    print(f"the image's web answered /healthz, /readyz, a page, /static/{stylesheet}, /metrics")


def main() -> int:
    found = subprocess.check_output([str(ROOT / "scripts" / "find-python")], text=True).strip()
    # The interpreter itself: a pyenv shim linked as `python` would pick another version.
    python = Path(subprocess.check_output([found, "-c", "import sys; print(sys.executable)"],
                                          text=True).strip())  # fmt: skip
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="image-check-") as scratch:
        image = build(Path(scratch), python)
        serve(image)
    print(f"image check passed in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
