"""HTTP transport pieces (the status page lives in `ui/`)."""
