"""What a request gets when it cannot be answered: the protocol's ``{"error": "..."}`` with one line."""

from __future__ import annotations


class RequestError(Exception):
    """A request that cannot be answered, and the HTTP status that says why (400: the request is
    wrong; 404: no such model; 503: not yet, try again; 401: no valid token; 413: too large)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class NotFound(RequestError):
    def __init__(self, message: str):
        super().__init__(message, 404)


class NotReady(RequestError):
    def __init__(self, message: str):
        super().__init__(message, 503)
