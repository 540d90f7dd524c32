#!/usr/bin/env python3
"""A tiny HTTP server on 127.0.0.1 that records what an agent client sends, for the fixtures in
tests/fixtures/clients/ (how they were made: that folder's README).

Every POST is saved as OUT/NNN-<path>.json ({"method", "path", "query", "headers", "body"}) and
answered with the smallest valid answer of its API (Anthropic Messages, OpenAI Responses, OpenAI
chat completions), whole or streamed as the request asks, so the client takes it and goes on.
`--tool NAME --args JSON` answers the first request that offers a tool NAME with a call of it
instead, so the client's next request carries a tool result (the round trip's shapes). GET
/v1/models answers one model. Python's standard library only: it runs beside any client.

    python scripts/capture_requests.py --port 8099 --out /tmp/capture/claude [--tool Read --args '{...}']
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

TEXT = "Done."


class Capture:
    def __init__(self, out: Path, tool: str | None, args: str, namespace: str | None = None):
        self.out = out
        self.namespace = namespace
        self.tool = tool
        self.args = args
        self.count = 0
        self.called = False
        self.lock = threading.Lock()

    def save(self, handler: BaseHTTPRequestHandler, body: object) -> None:
        parts = urlsplit(handler.path)
        with self.lock:
            self.count += 1
            name = f"{self.count:03d}-{parts.path.strip('/').replace('/', '_') or 'root'}.json"
        record = {"method": handler.command, "path": parts.path, "query": parse_qs(parts.query),
                  "headers": dict(handler.headers.items()), "body": body}
        (self.out / name).write_text(json.dumps(record, indent=1, ensure_ascii=False))

    def call_now(self, tools: list[str]) -> bool:
        """Whether this request is answered with the scripted tool call (the first that offers it)."""
        with self.lock:
            if self.tool and not self.called and self.tool in tools:
                self.called = True
                return True
            return False


def tool_names(body: dict) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):
            names.append(tool["function"].get("name"))
        names.append(tool.get("name"))
        for inner in tool.get("tools") or []:  # a Responses namespace tool
            if isinstance(inner, dict):
                names.append(inner.get("name"))
    return [n for n in names if n]


def make_handler(capture: Capture):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # one line per request on stderr
            print(f"{self.command} {self.path}", flush=True)

        def do_GET(self):
            path = urlsplit(self.path).path
            capture.save(self, None)
            if path.endswith("/models"):
                self._json({"object": "list", "data": [{"id": "capture", "object": "model", "created": 0,
                                                        "owned_by": "capture"}]})
            else:
                self._json({"error": {"message": f"no route {path}", "type": "invalid_request_error"}}, 404)

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            capture.save(self, body)
            path = urlsplit(self.path).path
            if not isinstance(body, dict):
                self._json({"error": {"message": "not JSON"}}, 400)
                return
            call = capture.call_now(tool_names(body))
            stream = bool(body.get("stream"))
            if path.endswith("/messages/count_tokens"):
                self._json({"input_tokens": 100})
            elif path.endswith("/messages"):
                self._anthropic(stream, call)
            elif path.endswith("/responses"):
                self._responses(stream, call)
            elif path.endswith("/chat/completions"):
                self._chat(stream, call)
            else:
                self._json({"error": {"message": f"no route {path}", "type": "invalid_request_error"}}, 404)

        # --- answers --------------------------------------------------------------------------

        def _json(self, obj: dict, status: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _events(self, events: list[tuple[str | None, object]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write(((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode())
                self.wfile.flush()
            self.close_connection = True

        def _anthropic(self, stream: bool, call: bool) -> None:
            usage = {"input_tokens": 100, "output_tokens": 3, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": 0}
            block = ({"type": "tool_use", "id": "toolu_capture1", "name": capture.tool, "input": json.loads(capture.args)}
                     if call else {"type": "text", "text": TEXT})
            message = {"id": "msg_capture", "type": "message", "role": "assistant", "model": "capture",
                       "content": [block], "stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None,
                       "usage": usage}
            if not stream:
                self._json(message)
                return
            start = {**message, "content": [], "stop_reason": None}
            opened = {**block, "input": {}} if call else {"type": "text", "text": ""}
            delta = ({"type": "input_json_delta", "partial_json": capture.args} if call
                     else {"type": "text_delta", "text": TEXT})
            self._events([("message_start", {"type": "message_start", "message": start}),
                          ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": opened}),
                          ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                          ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                          ("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                                                "stop_sequence": None},
                                             "usage": {"output_tokens": 3}}),
                          ("message_stop", {"type": "message_stop"})])

        def _responses(self, stream: bool, call: bool) -> None:
            if call:
                item = {"type": "function_call", "id": "fc_capture1", "call_id": "call_capture1", "name": capture.tool,
                        "arguments": capture.args, "status": "completed"}
                if capture.namespace:
                    item["namespace"] = capture.namespace
            else:
                item = {"type": "message", "id": "msg_capture", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}
            usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 3,
                     "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 103}
            response = {"id": "resp_capture", "object": "response", "created_at": int(time.time()),
                        "status": "completed", "model": "capture", "output": [item], "usage": usage, "error": None}
            if not stream:
                self._json(response)
                return
            events = [{"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
                      {"type": "response.output_item.added", "output_index": 0,
                       "item": {**item, "status": "in_progress"} if call else {**item, "content": []}}]
            if call:
                events.append({"type": "response.function_call_arguments.done", "item_id": item["id"],
                               "output_index": 0, "arguments": capture.args})
            else:
                events += [{"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                            "content_index": 0, "delta": TEXT},
                           {"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
                            "content_index": 0, "text": TEXT}]
            events += [{"type": "response.output_item.done", "output_index": 0, "item": item},
                       {"type": "response.completed", "response": response}]
            self._events([(e["type"], {**e, "sequence_number": i}) for i, e in enumerate(events)])

        def _chat(self, stream: bool, call: bool) -> None:
            cid = "chatcmpl-" + uuid.uuid4().hex[:12]
            calls = [{"index": 0, "id": "call_capture1", "type": "function",
                      "function": {"name": capture.tool, "arguments": capture.args}}] if call else None
            usage = {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}
            finish = "tool_calls" if call else "stop"
            if not stream:
                message = {"role": "assistant", "content": None if call else TEXT}
                if calls:
                    message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
                self._json({"id": cid, "object": "chat.completion", "created": int(time.time()), "model": "capture",
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
                return
            base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": "capture"}
            delta = {"role": "assistant", "tool_calls": calls} if call else {"role": "assistant", "content": TEXT}
            self._events([(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                          (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
                          (None, {**base, "choices": [], "usage": usage}),
                          (None, "[DONE]")])

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tool", help="answer the first request offering this tool with a call of it")
    parser.add_argument("--args", default="{}", help="the scripted call's arguments (JSON)")
    parser.add_argument("--namespace", help="the scripted Responses call's `namespace` field (a namespace tool's call)")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", options.port), make_handler(Capture(options.out, options.tool,
                                                                                   options.args, options.namespace)))
    print(f"capturing on http://127.0.0.1:{options.port} into {options.out}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
