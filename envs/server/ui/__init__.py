"""What a person sees of a server: the page at `/ui` and the read-only routes it watches through.

`page` serves the page (sign-in, the episode list, an episode's transcript, a form per tool) from
the Jinja templates, script and style in `web/`; `render` turns an env's text and tool schemas into
its HTML; `watch` lists the server's episodes and reads one's transcript (`GET /v1/episodes`,
`.../transcript`), for the page and for any script. None of it touches an env: the page acts only
through the episode API, so every error it shows is the API's own.
"""
