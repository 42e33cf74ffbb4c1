"""A stand-in for an RLinf entry script, run by the driver wrapper's tests: it prints what RLinf
prints (tests/fixtures: the embodied runner's metric tables on stdout, the reasoning runner's tqdm
bar on stderr) and exits with the code it is given."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--stdout", type=Path, help="a file printed on stdout")
    parser.add_argument("--stderr", type=Path, help="a file printed on stderr")
    parser.add_argument("--starts", type=Path, help="a line is added to it at every start")
    parser.add_argument("--until-sigterm", action="store_true", help="then exit with --exit")
    args = parser.parse_args()
    if args.starts:
        with args.starts.open("a") as starts:
            starts.write("started\n")
    if args.stdout:
        sys.stdout.buffer.write(args.stdout.read_bytes())
        sys.stdout.flush()
    if args.stderr:
        sys.stderr.buffer.write(args.stderr.read_bytes())
        sys.stderr.flush()
    if args.until_sigterm:

        def stop(*_: Any) -> None:
            sys.exit(args.exit)

        signal.signal(signal.SIGTERM, stop)
        print("training until SIGTERM", flush=True)
        while True:
            time.sleep(60)
    if args.exit:
        print("Traceback (most recent call last):", file=sys.stderr)
        print(f"RuntimeError: NCCL watchdog timeout (exit {args.exit})", file=sys.stderr)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
