"""`specllama serve`: an OpenAI-compatible HTTP API over one engine.

One engine thread iterates `Runtime.run_many` over a live `RequestQueue` (worker.py); the
Starlette app (app.py) routes each API's requests (api/) through one exchange (exchange.py):
the request turned into an engine request (schema.py), its events awaited and answered in the
API's own shapes, streamed as server-sent events or whole.
uvicorn runs it (run.py), draining in-flight requests on SIGTERM / Ctrl-C.
"""
