"""The page at `/ui`: play any served env by hand, watch live episodes, read finished ones.

Server-rendered HTML (Jinja templates and a little vanilla JavaScript shipped in the package, no
CDN, no build step). The page acts only through the episode API (`POST /v1/episodes`, `.../step`)
and watches through its read-only routes (`watch.py`), so every error it shows is the API's own.

Auth is the API's: with a token set, a browser signs in once at `/ui/login`; the token then lives
in an HttpOnly, SameSite=Strict cookie that `PageAuth` turns back into the bearer header the guard
checks. The cookie counts only for page navigations (GET under `/ui`) and for requests carrying
the page's `X-Agentrl-Page` header, which another site cannot send without a CORS preflight this
server never grants, so the cookie cannot be used to act from elsewhere.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import orjson
from fastapi import APIRouter, FastAPI, Query
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from agentrl.core.parsing import CALL_CLOSE, CALL_OPEN
from agentrl.protocol import dumps
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.ui.render import text_html, tool_forms
from agentrl.server.ui.watch import find, listing, summary

UI = "/ui"
LOGIN = f"{UI}/login"
COOKIE = "agentrl_page_token"
PAGE_HEADER = b"x-agentrl-page"
WEB = Path(__file__).parent / "web"
MAX_LOGIN_BODY = 4096

_templates = Environment(loader=FileSystemLoader(WEB), autoescape=select_autoescape(default=True))
_templates.filters["markup"] = text_html


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _templates.get_template(name).render(**context)
    return HTMLResponse(html, status, headers={"Cache-Control": "no-store"})


# --- the transcript as HTML ---------------------------------------------------------------------
def _info_view(info: Any) -> str:
    """The info a person wants to read: everything but the tool schemas (shown as forms)."""
    shown = {k: v for k, v in info.items() if k != "tools"} if isinstance(info, dict) else info
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode()


async def entries(ep: Any, start: int) -> tuple[str, int]:
    """The transcript's HTML from step `start` on (the first observation when `start` is 0).

    The snapshot is taken on the event loop, where steps are recorded; the rendering (Markdown of
    long observations) runs in a worker thread so that watching never stalls the rollouts.
    """
    t = ep.transcript
    first, steps, dropped, count = (t.first if start == 0 else None), t.since(start), t.dropped, t.count
    return await run_in_threadpool(_render_entries, first, steps, dropped), count


def _render_entries(first: bytes | None, steps: list[tuple[int, str, bytes]], dropped: int) -> str:
    shown = []
    for index, action, body in steps:
        result = orjson.loads(body)
        info = result["info"]
        shown.append({"index": index, "action": action, "result": result, "info": _info_view(info),
                      "progress": info.get("progress") if isinstance(info, dict) else None})
    opening = orjson.loads(first) if first is not None else None
    return _templates.get_template("entries.html").render(
        first=opening, first_info=_info_view(opening["info"]) if opening else "", steps=shown,
        dropped=dropped if opening else 0)


def page_router(registry: EpisodeRegistry) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(UI)
    async def index() -> HTMLResponse:
        return page("index.html", env_ids=registry.env_ids, data={"episodes": listing(registry)})

    @router.get(UI + "/episodes/{episode_id}")
    async def watch(episode_id: str) -> HTMLResponse:
        return await episode_page(episode_id, play=False)

    @router.get(UI + "/episodes/{episode_id}/play")
    async def play(episode_id: str) -> HTMLResponse:
        return await episode_page(episode_id, play=True)

    async def episode_page(episode_id: str, play: bool) -> HTMLResponse:
        ep = find(registry, episode_id)
        html, count = await entries(ep, 0)
        first = orjson.loads(ep.transcript.first)
        forms = tool_forms(first["info"].get("tools")) if play else []
        shown = summary(ep)
        data = {"episode_id": episode_id, "next": count, "play": play, "episode": shown,
                "call_open": CALL_OPEN, "call_close": CALL_CLOSE}
        return page("episode.html", ep=shown, entries=html, forms=forms, play=play, data=data)

    @router.get(UI + "/episodes/{episode_id}/entries")
    async def more(episode_id: str, start: int = Query(0, ge=0, le=2**31)) -> Response:
        """What the episode page appends while it polls: new entries' HTML and the summary."""
        ep = find(registry, episode_id)
        html, count = await entries(ep, start)
        return Response(dumps({"html": html, "next": count, "episode": summary(ep)}),
                        media_type="application/json")

    return router


# --- auth for browsers ----------------------------------------------------------------------------
class PageAuth:
    """Sign-in for the page, in front of the guard: a form at `/ui/login`, then a cookie.

    A browser cannot add a bearer header to a navigation; this lets it hold the same token instead.
    A page request without a valid cookie is sent to the form rather than shown a JSON 401.
    """

    def __init__(self, app: ASGIApp, token: str | None, operator_token: str | None = None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        # signed in with the operator's token, the page lists and shows every client's episodes
        self.tokens = [t.encode() for t in (token, operator_token) if t]

    def _valid(self, given: bytes) -> bool:
        return any(hmac.compare_digest(given, t) for t in self.tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None:
            return await self.app(scope, receive, send)
        path: str = scope["path"]
        if path == LOGIN:
            return await self._login(scope, receive, send)
        headers = scope["headers"]
        if any(name == b"authorization" for name, _ in headers):
            return await self.app(scope, receive, send)
        navigation = scope["method"] in ("GET", "HEAD") and (path == UI or path.startswith(UI + "/"))
        from_page = any(name == PAGE_HEADER for name, _ in headers)
        given = Request(scope).cookies.get(COOKIE, "").encode()
        if given and self._valid(given) and (navigation or from_page):
            scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + given)]}
        elif navigation:
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            response = RedirectResponse(f"{LOGIN}?next={quote(target, safe='')}", 303)
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        wanted = request.query_params.get("next", UI)
        if scope["method"] != "POST":
            return await page("login.html", next=_local(wanted), error=None)(scope, receive, send)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_LOGIN_BODY:
                return await page("login.html", 413, next=UI, error="request too large")(scope, receive, send)
        form = parse_qs(body.decode("utf-8", "replace"))
        given = (form.get("token") or [""])[0].strip().encode()
        target = _local((form.get("next") or [UI])[0])
        if not given or not self._valid(given):
            response: Response = page("login.html", 401, next=target, error="wrong token")
        else:
            response = RedirectResponse(target, 303)
            response.set_cookie(COOKIE, given.decode(), httponly=True, samesite="strict", path="/")
        return await response(scope, receive, send)


def _local(target: str) -> str:
    """Only a page of this server may follow the sign-in (no open redirect)."""
    return target if target == UI or (target.startswith(UI + "/") and "//" not in target) else UI


def mount_ui(app: FastAPI, registry: EpisodeRegistry, token: str | None,
             operator_token: str | None = None) -> None:
    """Serve the page on `app`. Call it after the guard is added: `PageAuth` must sit in front of it."""
    app.include_router(page_router(registry))
    app.mount(UI + "/static", StaticFiles(directory=WEB / "static"), name="ui-static")
    app.add_middleware(PageAuth, token=token, operator_token=operator_token)
