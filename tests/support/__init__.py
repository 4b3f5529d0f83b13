"""Fixtures shared by test modules (import them into the module that uses them)."""
