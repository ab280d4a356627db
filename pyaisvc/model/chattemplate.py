"""The one chat-prompt renderer: a conversation in the model's own chat template.

``render(tok, messages)`` renders messages (each a role and a content) with
the Jinja template the tokenizer carries (SmolLM2-Instruct's, from its
GGUF: ChatML with its default system line when the conversation has no
system message), in Jinja's sandbox, ready for the assistant's turn. A
tokenizer without a template (Qwen3.5) gets plain ChatML without a system
line. ``pyaisvc chat``, ``pyaisvc serve`` and the bench all render through
it, so one conversation is one prompt whichever front end sends it.

``conversation(turns, message)`` makes the messages of earlier (message,
reply) turns and a new message; ``stop_ids(tok)`` are the ids that end a
reply (end of turn, end of text).
"""

from __future__ import annotations

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pyaisvc.errors import AisvcError
from pyaisvc.model.tokenizer import Tokenizer

END_OF_TURN = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
Messages = list[dict[str, str]]


class TemplateFailed(AisvcError):
    """The chat template cannot render this conversation."""


def render(tok: Tokenizer, messages: Messages) -> str:
    """The conversation in the model's chat template, ready for the assistant's turn;
    TemplateFailed if the template refuses it (e.g. roles out of its order)."""
    template = getattr(tok, "chat_template", None)
    if not template:
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}{END_OF_TURN}\n"
                       for m in messages) + "<|im_start|>assistant\n"
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                                bos_token="", eos_token="")
    except TemplateError as e:
        raise TemplateFailed(f"the model's chat template failed: {e}") from e


def conversation(turns: list[tuple[str, str]], message: str) -> Messages:
    """The messages of earlier (message, reply) turns, then message from the user."""
    out: Messages = []
    for asked, reply in turns:
        out += [{"role": "user", "content": asked}, {"role": "assistant", "content": reply}]
    return out + [{"role": "user", "content": message}]


def stop_ids(tok: Tokenizer) -> set[int]:
    """The ids that end a reply: end of turn and end of text."""
    return set(tok.encode(END_OF_TURN)) | set(tok.encode(END_OF_TEXT))
