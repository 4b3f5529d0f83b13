from om_mcp.cli import main

raise SystemExit(main())
