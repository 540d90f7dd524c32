"""One OpenAI-compatible server (llama.cpp's llama-server, vLLM, llama-cpp-python's server): build a
chat request, send it, parse the answer, and say whether a failure is worth retrying.

HTTP is the standard library's `http.client`: one keep-alive connection per worker thread (a worker
talks to one server only), so a batch pays one TCP handshake per worker rather than per prompt, and
specllama stays free of install dependencies. `urllib.request` would open a new connection for
every request; `requests`/`httpx` would add a dependency for features a POST-and-read loop does not
need.

Requests are not streamed: a batch needs only the finished answer, and one JSON body carries the
text, `usage` and llama.cpp's `timings` together with less parsing per token than server-sent
events. It also makes a reply all-or-nothing: a prompt is either answered whole or failed, never
half written.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import socket
import threading
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from specllama.batch.server_reply import ServerReply, with_speculation
from specllama.decoding.request import GenerationConfig
from specllama.errors import SpecllamaError

# A chat completion is a few kilobytes (100k tokens of text stay under 1 MB); a body past this is a
# misbehaving server (or not a server), and reading it whole would take memory without bound, once
# per worker.
MAX_REPLY_BYTES = 16 << 20
READ_CHUNK = 1 << 16
# More workers than this for one server is a number the server got wrong (/props), not a plan.
MAX_SLOTS = 256
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads pairs valid surrogates; the rest are lone


class ServerUrlError(SpecllamaError):
    """A --server address that cannot be used."""


class ServerError(Exception):
    """A request that did not produce an answer. `retryable`: another attempt (here or on another
    server) may succeed; otherwise the prompt itself is at fault (e.g. 400: too long for the context)."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 server_fault: bool = True, refused_key: bool = False):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked us to wait (429/503 Retry-After)
        self.server_fault = server_fault  # counts against the server's health
        self.refused_key = refused_key  # 401/403: this server will refuse every prompt with this key


def base_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of a server address; a trailing /v1 is the API root, not
    part of the prefix, so `http://h:8000/v1` and `http://h:8000` are the same server."""
    try:
        parts = urlsplit(url.strip() if "://" in url else "http://" + url.strip())
        hostname = parts.hostname
    except ValueError as e:  # "http://[::1": an unclosed IPv6 bracket
        raise ServerUrlError(f"--server {url!r}: not a valid address ({e})") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise ServerUrlError(f"--server {url!r}: expected an address like http://host:8080")
    if any(ch.isspace() or ord(ch) < 32 for ch in url.strip()):
        raise ServerUrlError(f"--server {url!r}: an address holds no spaces or control characters")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ServerUrlError(f"--server {url!r}: the port is not a number") from None
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    return parts.scheme, hostname, port, prefix


def chat_body(prompt: str, system: str | None, model: str, config: GenerationConfig) -> dict:
    """batch's settings (the one settings type, checked where they were typed) as request fields:
    names translated, nothing checked again. top_k and min_p are extensions that llama.cpp, vLLM and
    llama-cpp-python accept; they are sent only when set, so a server that does not know them is not
    handed them by default (then the server's own defaults apply)."""
    sampling = config.sampling
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    body: dict = {"model": model, "messages": messages, "max_tokens": config.max_tokens,
                  "temperature": sampling.temperature, "top_p": sampling.top_p, "stream": False}
    if sampling.top_k > 0:
        body["top_k"] = sampling.top_k
    if sampling.min_p > 0:
        body["min_p"] = sampling.min_p
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if config.stop:
        body["stop"] = list(config.stop)
    return body


def parse_chat_reply(status: int, headers: dict[str, str], data: bytes, seconds: float) -> ServerReply:
    """The answer of POST /v1/chat/completions, or the ServerError it amounts to."""
    if status != 200:
        raise http_error(status, headers, data)
    try:
        obj = json.loads(data)
        choice = obj["choices"][0]
        text = choice["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not text")
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
        # A 200 whose body is not a chat completion: a proxy page, a truncated body, a server bug.
        # Worth another attempt, and it says something about the server, not the prompt.
        raise ServerError(f"malformed response ({_describe(e)}): {_snippet(data)}", retryable=True) from None
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    timings = obj.get("timings") if isinstance(obj.get("timings"), dict) else {}
    tokens = _int(usage.get("completion_tokens"))
    if tokens is None:
        tokens = _int(timings.get("predicted_n")) or 0
    per_s = timings.get("predicted_per_second")
    # Only what can be written as JSON and means something: NaN, infinities and negative counts
    # from a server are dropped (a bare NaN in the output is not JSON).
    if not isinstance(per_s, (int, float)) or isinstance(per_s, bool) or not 0 < per_s < math.inf:
        per_s = tokens / seconds if seconds > 0 else 0.0
    drafted, accepted = _int(timings.get("draft_n")), _int(timings.get("draft_n_accepted"))
    if drafted is None or accepted is None or accepted > drafted:
        drafted = accepted = None
    finish = choice.get("finish_reason")
    return ServerReply(text=text_of(text), finish_reason=text_of(finish) if isinstance(finish, str) else None,
                       tokens=tokens, prompt_tokens=_int(usage.get("prompt_tokens")), seconds=seconds,
                       tokens_per_s=float(per_s), drafted=drafted, accepted=accepted)


def text_of(value: str) -> str:
    """A server's string as writable text: a lone surrogate (JSON's \\ud800 escape, no character
    of its own) becomes U+FFFD, as undecodable bytes would."""
    return _LONE_SURROGATE.sub("\ufffd", value)


def http_error(status: int, headers: dict[str, str], data: bytes) -> ServerError:
    message = f"HTTP {status}: {_snippet(data)}"
    if status == 429 or status >= 500 or status == 408:
        return ServerError(message, retryable=True, retry_after=retry_after(headers.get("retry-after")))
    if status in (401, 403):
        # A missing or wrong key: every prompt will be refused the same way by this server, so it
        # leaves the batch at once (retrying it for minutes ended in "no server answered").
        return ServerError(message, retryable=False, refused_key=True)
    if status == 404:
        # Wrong address or wrong model: every prompt will fail the same way, on this server.
        return ServerError(message, retryable=True)
    return ServerError(message, retryable=False, server_fault=False)  # 400, 413, 422: this prompt's fault


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


class ServerClient:
    """A keep-alive connection to one server, for one thread at a time."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 600.0):
        self.url = url
        self.scheme, self.host, self.port, self.prefix = base_url(url)
        check_timeout(timeout)
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            check_api_key(api_key)
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._conn: http.client.HTTPConnection | None = None
        self._expired = False  # set by the request's deadline

    def chat(self, body: dict) -> ServerReply:
        started = time.monotonic()
        status, headers, data = self.request("POST", "/v1/chat/completions", json.dumps(body).encode())
        return with_speculation(parse_chat_reply(status, headers, data, time.monotonic() - started), data)

    def get_json(self, path: str) -> object | None:
        """A GET whose JSON answer is optional information (None on 4xx or a body that is not JSON);
        connection failures and 5xx still raise, they mean the server is not answering."""
        status, headers, data = self.request("GET", path)
        if status >= 500 or status == 429:
            raise http_error(status, headers, data)
        if status != 200:
            return None
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            return None

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request, answered whole within `timeout` seconds from its start (not per read: a
        server trickling a byte at a time is as late as a silent one)."""
        deadline = time.monotonic() + self.timeout
        reused = self._conn is not None
        try:
            return self._send_by(deadline, method, path, body)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
            self.close()
            if not reused or self._expired:
                raise self._failure(e) from None
            # The server closed an idle keep-alive connection: not a failure, try once on a new one.
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise self._failure(e) from None
        try:
            return self._send_by(deadline, method, path, body)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise self._failure(e) from None

    def _failure(self, e: BaseException) -> ServerError:
        if self._expired:
            return ServerError(f"timed out: no whole answer within {self.timeout:g} s (--timeout)", retryable=True)
        if isinstance(e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
            return ServerError(f"connection lost: {_describe(e)}", retryable=True)
        return ServerError(_connection_message(e), retryable=True)

    def _send_by(self, deadline: float, method: str, path: str, body: bytes | None):
        """_send, with the connection shut down at the deadline: every read then fails at once."""
        self._expired = False
        left = deadline - time.monotonic()
        if left <= 0:
            self._expired = True
            raise TimeoutError("no time left")
        watchdog = threading.Timer(left, self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._send(method, path, body)
        finally:
            watchdog.cancel()

    def _expire(self) -> None:
        self._expired = True
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _send(self, method: str, path: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        self._conn.request(method, self.prefix + path, body=body, headers=self._headers)
        response = self._conn.getresponse()
        data = _read_capped(response)
        headers = {k.lower(): v for k, v in response.getheaders()}
        if response.will_close:
            self.close()
        return response.status, headers, data

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _read_capped(response: http.client.HTTPResponse) -> bytes:
    """The body, refused past MAX_REPLY_BYTES (an endless chunked body, a 300 MB page)."""
    declared = response.getheader("content-length")
    if declared and declared.strip().isdigit() and int(declared) > MAX_REPLY_BYTES:
        raise ServerError(f"the reply is {int(declared):,} bytes, more than the {MAX_REPLY_BYTES >> 20} MiB "
                          "a chat completion can need", retryable=True)
    data = bytearray()
    while chunk := response.read(READ_CHUNK):
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            raise ServerError(f"the reply exceeds {MAX_REPLY_BYTES >> 20} MiB, more than a chat completion "
                              "can need; not read further", retryable=True)
    return bytes(data)


def check_timeout(seconds: float) -> None:
    if not 0 < seconds < math.inf:  # NaN fails both comparisons
        raise SpecllamaError(f"--timeout must be a finite number of seconds > 0, got {seconds}")


def check_api_key(key: str) -> None:
    """A key is sent as a header: a line break in it would end the header (or inject another)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key) or not key.isascii():
        raise SpecllamaError("the API key (SPECLLAMA_API_KEY or OPENAI_API_KEY) holds a line break, a control "
                             "or a non-ASCII character; set it to the key alone")


def _connection_message(e: BaseException) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return f"connection failed: {_describe(e)}"


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _snippet(data: bytes, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace").strip().replace("\n", " ")
    return (text[:limit] + "...") if len(text) > limit else (text or "(empty body)")


def _int(value: object) -> int | None:
    """A count from a server: a whole number >= 0, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def discover(client: ServerClient) -> tuple[str | None, int | None]:
    """(model name, parallel slots) as the server reports them, None for what it does not say:
    /v1/models (every OpenAI-compatible server) and llama-server's GET /props (`total_slots`, its -np)."""
    models = client.get_json("/v1/models")
    model = None
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, dict) and isinstance(first.get("id"), str) and first["id"]:
            model = first["id"]
    props = client.get_json("/props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return model, (min(slots, MAX_SLOTS) if _int(slots) and slots > 0 else None)
