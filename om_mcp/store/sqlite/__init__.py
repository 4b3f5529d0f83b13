"""The SQLite store: plain functions of a connection, run one transaction per trip."""
