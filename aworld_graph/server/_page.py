"""The live run page at ``/``: one HTML file with inline script and style (no build step, nothing
fetched off-host), and the two JSON routes it draws from, both made by :mod:`aworld_graph.viz`:
an assistant's topology (SVG and node data) and a thread's run path over it.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from ..viz import load_run, run_path, to_svg, view_of
from ..viz.html import page_data
from ._wire import ApiError, clean

if TYPE_CHECKING:
    from ._app import App, Rows
    from ._assistants import Assistant

__all__ = ["CSP", "PageRoutes"]

CSP = (
    "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""The page may talk to this server only."""


def _drawn(assistant: Assistant) -> None:
    """A 422 for a LangGraph application: the page draws aworld-graph workflows."""
    if assistant.is_app:
        raise ApiError(
            422,
            "not_a_workflow",
            f"{assistant.assistant_id} is a LangGraph application: the page draws aworld-graph "
            f"workflows; its graph is GET /assistants/{assistant.assistant_id}/graph",
        )


class PageRoutes:
    def __init__(self, app: App) -> None:
        self.app = app
        self._svgs: dict[str, str] = {}

    def rows(self) -> Rows:
        get = ["GET"]
        return [
            ("/", self.index, get),
            ("/ui/assistants/{assistant_id:str}/view", self.view, get),
            ("/ui/threads/{thread_id:str}/run", self.run, get),
        ]

    async def index(self, request: Request) -> Response:
        html = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
        headers = {"Content-Security-Policy": CSP, "Cache-Control": "no-store"}
        headers["Referrer-Policy"] = "no-referrer"
        return Response(html, media_type="text/html; charset=utf-8", headers=headers)

    def _svg(self, assistant: Assistant) -> str:
        if assistant.assistant_id not in self._svgs:
            self._svgs[assistant.assistant_id] = to_svg(assistant.source)
        return self._svgs[assistant.assistant_id]

    async def view(self, request: Request) -> Response:
        """``{"svg", "data"}``: the topology drawing and its nodes, edges and cards."""
        assistant = self.app.assistants.get(request.path_params["assistant_id"])
        _drawn(assistant)
        data = page_data(view_of(assistant.source))
        return self.app.json({"svg": self._svg(assistant), "data": clean(data)})

    async def run(self, request: Request) -> Response:
        """A thread's run as the viz page reads it: its steps and the route it took, and the
        checkpoint each superstep made (to fork from)."""
        thread_id = request.path_params["thread_id"]
        threads = self.app.threads
        assistant = await threads.assistant_of(thread_id)
        if assistant is None:
            if not await threads.exists(thread_id):
                raise threads.not_found(thread_id)
            raise ApiError(409, "unknown_workflow", f"thread {thread_id} ran no served workflow")
        _drawn(assistant)
        thread = await threads.get(thread_id)
        if not thread["values"]:
            return self.app.json(
                {"assistant_id": assistant.assistant_id, "thread": thread, "run": None}
            )
        response = await load_run(assistant.source, thread_id, self.app.saver)
        path = run_path(response, view_of(assistant.source))
        history = await threads.history(thread_id, {"limit": 1000})
        checkpoints = {
            h["metadata"].get("step"): h["checkpoint"]["checkpoint_id"] for h in reversed(history)
        }
        return self.app.json(
            {
                "assistant_id": assistant.assistant_id,
                "thread": thread,
                "run": clean(path),
                "checkpoints": clean(checkpoints),
            }
        )
