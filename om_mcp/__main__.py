"""`python -m om_mcp`: the same as the `om-mcp` command."""

from om_mcp.cli import main

raise SystemExit(main())
