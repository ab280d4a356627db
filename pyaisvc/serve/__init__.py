"""``pyaisvc serve``: the kernel AI service behind an OpenAI-compatible HTTP API.

One request's path::

    HTTP client -> app (validation, tokenizer) -> engine (host queue, window)
      -> gateway socket -> virtio port -> the guest's gateway -> ai_submit_opts
      -> the worker's batch -> ai_stream -> T frames -> text -> the client

- ``frames``: the gateway channel's frames (docs/GATEWAY.md) as Python values;
- ``gateway``: one connection to a gateway: request ids, the window of
  requests the gateway holds, the bounded host queue behind it, cancels;
- ``engine``: the guest under QEMU with its gateway: boot, health, reboot
  after the guest died;
- ``text``: prompts (the chat template) and the generated text as it
  streams (UTF-8 safe, stop strings);
- ``metrics``: the Prometheus metrics; ``app``: the FastAPI application.
"""
