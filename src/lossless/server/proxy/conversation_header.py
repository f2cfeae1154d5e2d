"""The ``X-Lossless-Conversation`` header, read on a request and written on an answer.

HTTP header values are bytes that servers and clients treat as latin-1, and a raw CR or LF
would end the header. Conversation ids are Unicode (``用户会话1``), so:

* a request's header is read as UTF-8 bytes (what curl or ``http.client`` send for a
  non-ASCII value), then its ``%XX`` escapes are decoded as percent-encoded UTF-8 (RFC
  3986, what ``encodeURIComponent`` or ``urllib.parse.quote(id, safe="")`` make). An id
  with a literal ``%`` followed by two hex digits must send that ``%`` as ``%25``.
* the answer's header carries the id as it is when it is plain printable ASCII (what it
  always was), else percent-encoded the same way, so a client can decode any value it
  gets with one unquote and send it back as it came.

Ids with control characters never get this far: ``check_conversation_id`` refuses them.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from starlette.requests import Request

from lossless.server.params import bad

__all__ = ["CONVERSATION_HEADER", "conversation_header_value", "requested_conversation"]

CONVERSATION_HEADER = "x-lossless-conversation"
_SHOWN = "X-Lossless-Conversation"
_PLAIN = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")  # printable ASCII, no space at either end
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def requested_conversation(request: Request, body_field: object, field: str) -> str | None:
    """The conversation a proxied request names: its ``X-Lossless-Conversation`` header,
    decoded, else the body's ``field`` (OpenAI's ``user``, Anthropic's ``metadata.user_id``).
    A header that is not UTF-8, or a field that is there but not a string, is a 400 naming it."""
    header = request.headers.get(CONVERSATION_HEADER)
    if header:
        return decode_header(header)
    if body_field is not None and not isinstance(body_field, str):
        raise bad(f"'{field}' names the conversation when no {_SHOWN} header is sent: it must be a string, got "
                  f"{type(body_field).__name__} {body_field!r}")
    return body_field


def decode_header(value: str) -> str:
    """A header value as Starlette gives it (its bytes read as latin-1) back to the id the
    client meant: the bytes as UTF-8, then any ``%XX`` escapes."""
    try:
        text = value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise bad(f"the {_SHOWN} header is not UTF-8: send the conversation id as UTF-8, or percent-encoded "
                  "UTF-8 (e.g. %E5%AF%B9 for 对)") from None
    if not _ESCAPE.search(text):
        return text
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise bad(f"the {_SHOWN} header's %XX escapes are not percent-encoded UTF-8: {text!r}") from None


def conversation_header_value(conversation_id: str) -> str:
    """The id as the answer's ``x-lossless-conversation`` header carries it: unchanged when
    it is printable ASCII with nothing that reads as an escape, else percent-encoded UTF-8
    (a raw non-latin-1 character cannot be sent at all, and an id like ``50%25`` would
    decode to something else)."""
    if _PLAIN.fullmatch(conversation_id) and not _ESCAPE.search(conversation_id):
        return conversation_id
    return quote(conversation_id, safe="")
