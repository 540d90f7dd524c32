"""`specllama serve`: an OpenAI-compatible HTTP API over one engine.

One engine thread iterates `Runtime.run_many` over a live `RequestQueue` (worker.py); the
Starlette app (app.py) turns HTTP requests into engine requests (schema.py), waits for their
events and answers in OpenAI's shapes (responses.py), streamed as server-sent events or whole.
uvicorn runs it (run.py), draining in-flight requests on SIGTERM / Ctrl-C.
"""
