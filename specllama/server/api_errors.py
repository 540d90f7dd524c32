"""Errors a client gets as OpenAI-style JSON: {"error": {"message", "type", "param", "code"}}.

Every refusal goes through APIError, so no client ever sees a traceback and every status is one of
the few OpenAI's clients know how to handle (400, 401, 404, 413, 503 with Retry-After, 500).
"""

from __future__ import annotations

from starlette.responses import JSONResponse

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
               405: "invalid_request_error", 413: "invalid_request_error", 503: "server_error", 500: "server_error"}


class APIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after  # seconds, for 503: when to try again

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": ERROR_TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def invalid(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def renamed(error: APIError, names: dict[str, str]) -> APIError:
    """An error of the chat request a route was translated into, told in the route's own field
    names (Responses: max_output_tokens, input; Anthropic: stop_sequences), issue 41."""
    param, message = error.param, error.message
    for ours, theirs in names.items():
        if param is not None and (param == ours or param.startswith(ours + ".")):  # not [i]: items are counted apart
            param = theirs + param[len(ours):]
        message = message.replace(f"'{ours}'", f"'{theirs}'")
    if (param, message) == (error.param, error.message):
        return error
    return APIError(error.status, message, param=param, code=error.code, retry_after=error.retry_after)
