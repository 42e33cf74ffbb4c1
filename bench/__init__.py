"""Benchmarks (`make bench`): each module's run() measures against a floor in the same run and
returns a markdown section; bench/__main__.py writes them all to docs/benchmarks.md."""
