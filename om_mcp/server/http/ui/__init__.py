"""The status page: a static page (index.html, app.js, style.css) over a small JSON API.

`ui_routes(api)` gives the Starlette routes; `api` is anything implementing
`contract.UiDataSource`. Mount them on the HTTP transport behind the same auth
as `/mcp`.
"""
