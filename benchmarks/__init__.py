"""Benchmark scripts (run as ``python benchmarks/<name>.py``); a package so tests can import ``benchmarks.inputs``."""
