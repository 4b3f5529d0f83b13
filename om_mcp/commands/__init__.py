"""One module per CLI command; `_output` holds the shared printing helpers."""
