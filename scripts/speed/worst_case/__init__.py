"""Inputs shared by the benchmark scripts and the tests that assert the same bounds."""
