"""Test doubles and throwaway servers shipped with the package, for tests and benchmarks."""
