"""The generated text as it streams, UTF-8 safe, cut at stop ids and stop strings.

(Chat prompts are rendered by pyaisvc.model.chattemplate, for every front end.)

``TextStream`` turns the ids of one request into text piece by piece, as
they arrive. The ids so far are decoded again after each arrival and only
the new end of the text is handed out, so:

- a piece never ends inside a UTF-8 character: while the text ends in the
  replacement character (a token that is only part of a character's bytes)
  nothing is handed out;
- stop ids (end of text, end of turn) are not text: they end the request;
- stop strings are found in the decoded text, even when split over tokens:
  the text is cut before the first one, and the end of the text that could
  still become a stop string is held back until it cannot.

The pieces add up to ``text``, the request's whole reply.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyaisvc.model.tokenizer import Tokenizer

PARTIAL = "\ufffd"  # what decoding gives for the bytes of an unfinished character


class TextStream:
    """One request's text as its ids arrive; see the module's comment."""

    def __init__(self, tok: Tokenizer, stops: Iterable[str] = (),
                 stop_id_set: Iterable[int] = ()) -> None:
        """A stream for one request that ends the text at any of stops (strings) or
        stop_id_set (ids)."""
        self._tok = tok
        self._stops = [s for s in stops if s]
        self._stop_ids = set(stop_id_set)
        self.ids: list[int] = []  # the text's ids (stop ids left out)
        self.generated = 0  # every id that arrived, stop ids included
        self.text = ""  # handed out so far
        self.finish: str | None = None  # "stop" once a stop id or stop string came
        self.stopped_by: str | None = None  # "id" or "string": what ended the text

    def push(self, ids: Iterable[int]) -> str:
        """The new piece of text these ids add ("" when there is none yet)."""
        if self.finish is not None:
            return ""
        for i in ids:
            self.generated += 1
            if i in self._stop_ids:
                self.finish, self.stopped_by = "stop", "id"
                break
            self.ids.append(i)
        full = self._tok.decode(self.ids, skip_special_tokens=True)
        cut = min((at for s in self._stops if (at := full.find(s)) >= 0), default=-1)
        if cut >= 0:
            self.finish, self.stopped_by = "stop", "string"
            return self._hand_out(full[:cut])
        if self.finish is not None:  # a stop id: what came before it is final
            return self._hand_out(full)
        if full.endswith(PARTIAL):
            return ""
        return self._hand_out(full[:len(full) - self._held(full)])

    def close(self) -> str:
        """The rest of the text once no more ids come (what was held back)."""
        if self.finish is not None:
            return ""
        return self._hand_out(self._tok.decode(self.ids, skip_special_tokens=True))

    def _held(self, full: str) -> int:
        """How many characters at the end of full could begin a stop string."""
        return max((k for s in self._stops for k in range(1, len(s))
                    if full.endswith(s[:k])), default=0)

    def _hand_out(self, upto: str) -> str:
        """What upto adds to the text handed out so far (now upto); "" when it adds nothing."""
        if not upto.startswith(self.text) or len(upto) <= len(self.text):
            return ""
        piece = upto[len(self.text):]
        self.text = upto
        return piece
