"""Starlette routes for the status page: the three static files and the JSON API.

    app.routes.extend(ui_routes(data_source))   # behind the same auth as /mcp

The page is served at `/` and `/ui` (`/ui/` sends the browser to `/ui`, since the
page names its files relative to where it is); its files at `/ui/app.js`,
`/ui/style.css` and `/ui/favicon.svg` (also `/favicon.ico`); the API under `/api/`
(see `contract`). The static files hold no data, so only `/api/` needs the auth check; DELETE, PUT and a JSON POST are
not "simple" cross-origin requests, so a browser will not send them from another
site without a CORS preflight, which these routes never grant.

What a route reads besides its path is declared with it (`takes`: its query parameters and the
fields of its JSON body) and read only through `_query` and `_field`, which refuse an undeclared
name: so whatever enumerates the routes (the tenant conformance matrix in the tests) sees every
input of every route, the day it is added.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, NamedTuple, overload

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from om_mcp.server.http.ui.contract import Refused, UiDataSource, Unknown

EVENTS_LIMIT = 500
MESSAGES_LIMIT = 100
_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
# The page loads nothing from elsewhere and runs no inline script.
_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"


class Inputs(NamedTuple):
    """What a route reads besides its path parameters."""

    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()


NO_INPUTS = Inputs()


def takes(*, query: tuple[str, ...] = (), body: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """Declare a route's query parameters and JSON body fields (see the module docstring)."""

    def mark(handler: Any) -> Any:
        handler.inputs = Inputs(query, body)
        return handler

    return mark


def inputs_of(route: Route) -> Inputs:
    return getattr(route.endpoint, "inputs", NO_INPUTS)


def ui_routes(api: UiDataSource) -> list[Route]:
    files = {name: resources.files(__package__).joinpath(name).read_bytes() for name in _FILES}

    def static(name: str):
        async def serve(request: Request) -> Response:
            return Response(
                files[name],
                media_type=_FILES[name],
                headers={
                    "Cache-Control": "no-cache",
                    "Content-Security-Policy": _CSP,
                    "X-Content-Type-Options": "nosniff",
                },
            )

        return serve

    async def to_page(request: Request) -> Response:
        # Relative, so the page still works behind a proxy that serves it under a prefix; the
        # browser keeps the #fragment (the token, the thread) across the redirect.
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"../ui{query}", status_code=308)

    async def info(request: Request) -> Response:
        return _json(await api.info())

    async def resource_list(request: Request) -> Response:
        return _json(await api.resources())

    async def thread_list(request: Request) -> Response:
        resource_id = request.path_params["resource_id"]
        return _found(await api.threads(resource_id), f"unknown resource {resource_id!r}")

    async def thread(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        return _found(await api.thread(thread_id), f"unknown thread {thread_id!r}")

    @takes(query=("after", "limit"))
    async def events(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        after = _int_param(request, "after", None)
        limit = _int_param(request, "limit", 200)
        if isinstance(after, str):
            return _error(400, after)
        if isinstance(limit, str):
            return _error(400, limit)
        if not 1 <= limit <= EVENTS_LIMIT:
            return _error(400, f"limit: expected 1 to {EVENTS_LIMIT}")
        return _found(await api.events(thread_id, after, limit), f"unknown thread {thread_id!r}")

    async def series(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        return _found(await api.series(thread_id), f"unknown thread {thread_id!r}")

    @takes(query=("limit", "offset", "q", "before", "id"))
    async def messages(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        limit = _int_param(request, "limit", 20)
        offset = _int_param(request, "offset", 0)
        for problem in (limit, offset):
            if isinstance(problem, str):
                return _error(400, problem)
        assert isinstance(limit, int) and isinstance(offset, int)
        if not 1 <= limit <= MESSAGES_LIMIT:
            return _error(400, f"limit: expected 1 to {MESSAGES_LIMIT}")
        query, before, message_id = _query(request, "q"), _query(request, "before"), _query(request, "id")
        if sum(x is not None for x in (query, before, message_id)) > 1:
            return _error(400, "give one of q (search), before (the next page) and id (one message)")
        try:
            found = await api.messages(
                thread_id, limit=limit, before=before, query=query, offset=offset, message_id=message_id
            )
        except Refused as error:
            return _error(400, str(error))
        except Unknown as error:
            return _error(404, str(error))
        return _found(found, f"unknown thread {thread_id!r}")

    @takes(body=("title",))
    async def title(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        try:
            name = _field(request, await _json_body(request), "title")
            if not isinstance(name, str):
                return _error(400, 'title: expected a JSON body {"title": "the thread\'s name"}')
            return _found(await api.retitle(thread_id, name), f"unknown thread {thread_id!r}")
        except Refused as error:
            return _error(400, str(error))

    async def forget(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        return _found(await api.forget_thread(thread_id), f"unknown thread {thread_id!r}")

    @takes(body=("text",))
    async def observation(request: Request) -> Response:
        """DELETE forgets the line or group; PUT {"text": ...} corrects the line."""
        thread_id, observation_id = request.path_params["thread_id"], request.path_params["observation_id"]
        missing = f"unknown observation {observation_id!r} in thread {thread_id!r}"
        try:
            if request.method == "DELETE":
                return _found(await api.forget_observation(thread_id, observation_id), missing)
            text = _field(request, await _json_body(request), "text")
            if not isinstance(text, str):
                return _error(400, 'text: expected a JSON body {"text": "the corrected line"}')
            return _found(await api.correct_observation(thread_id, observation_id, text), missing)
        except Refused as error:
            return _error(400, str(error))

    @takes(body=("generation",))
    async def restore(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        try:
            generation = _field(request, await _json_body(request), "generation")
            if isinstance(generation, bool) or not isinstance(generation, int):
                return _error(400, 'generation: expected a JSON body {"generation": N}')
            return _found(await api.restore_generation(thread_id, generation), f"unknown thread {thread_id!r}")
        except Refused as error:
            return _error(400, str(error))

    async def grants(request: Request) -> Response:
        try:
            return _json(await api.grants())
        except Refused as error:
            return _error(403, str(error))

    async def revoke_grant(request: Request) -> Response:
        grant_id = request.path_params["grant_id"]
        try:
            return _found(await api.revoke_grant(grant_id), f"unknown grant {grant_id!r}")
        except Refused as error:
            return _error(403, str(error))

    return [
        Route("/", static("index.html"), methods=["GET"]),
        Route("/ui", static("index.html"), methods=["GET"]),
        Route("/ui/", to_page, methods=["GET"]),
        Route("/ui/app.js", static("app.js"), methods=["GET"]),
        Route("/ui/style.css", static("style.css"), methods=["GET"]),
        # The page names its icon; /favicon.ico is what a browser asks for before it reads the page.
        Route("/ui/favicon.svg", static("favicon.svg"), methods=["GET"]),
        Route("/favicon.ico", static("favicon.svg"), methods=["GET"]),
        Route("/api/info", info, methods=["GET"]),
        Route("/api/resources", resource_list, methods=["GET"]),
        Route("/api/resources/{resource_id:path}/threads", thread_list, methods=["GET"]),
        Route("/api/threads/{thread_id:path}/events", events, methods=["GET"]),
        Route("/api/threads/{thread_id:path}/series", series, methods=["GET"]),
        Route("/api/threads/{thread_id:path}/messages", messages, methods=["GET"]),
        Route("/api/threads/{thread_id:path}/title", title, methods=["PUT"]),
        Route("/api/threads/{thread_id:path}/observations/{observation_id}", observation, methods=["DELETE", "PUT"]),
        Route("/api/threads/{thread_id:path}/restore", restore, methods=["POST"]),
        Route("/api/threads/{thread_id:path}", thread, methods=["GET"]),
        Route("/api/threads/{thread_id:path}", forget, methods=["DELETE"]),
        Route("/api/grants", grants, methods=["GET"]),
        Route("/api/grants/{grant_id}", revoke_grant, methods=["DELETE"]),
    ]


@overload
def _int_param(request: Request, name: str, default: int) -> int | str: ...
@overload
def _int_param(request: Request, name: str, default: None) -> int | str | None: ...


def _int_param(request: Request, name: str, default: int | None) -> int | str | None:
    """The parameter's value, `default` when absent, or an error message (a str)."""
    value = _query(request, name)
    if value is None:
        return default
    if not value.isdigit():
        return f"{name}: expected a non-negative integer, got {value!r}"
    return int(value)


def _declared(request: Request, where: str, name: str) -> None:
    if name not in getattr(getattr(request.scope.get("endpoint"), "inputs", NO_INPUTS), where):
        raise TypeError(f"{request.url.path}: {where} input {name!r} is read but not declared with @takes")


def _query(request: Request, name: str) -> str | None:
    """A declared query parameter; None when absent or empty."""
    _declared(request, "query", name)
    return request.query_params.get(name) or None


def _field(request: Request, body: Any, name: str) -> Any:
    """A declared field of the JSON body; None when the body is not an object or lacks it."""
    _declared(request, "body", name)
    return body.get(name) if isinstance(body, dict) else None


async def _json_body(request: Request) -> Any:
    """The request's JSON; a body of another type (a form another site could post) is refused."""
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise Refused("send the body as application/json")
    try:
        return await request.json()
    except ValueError:
        raise Refused("the body is not valid JSON") from None


def _json(value: Any) -> Response:
    data: Any
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json")
    elif isinstance(value, list):
        data = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    else:
        data = value
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


def _found(value: Any, missing: str) -> Response:
    return _error(404, missing) if value is None else _json(value)


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
