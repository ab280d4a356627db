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
- ``live``: the kernel's table as the page shows it (``TableView``);
- ``text``: the generated text as it streams (UTF-8 safe, stop strings);
  prompts are rendered by pyaisvc.model.chattemplate;
- ``metrics``: the Prometheus metrics;
- ``schemas``: every request and reply body; ``errors``: every refusal;
  ``service``: what the routes serve and the request's checks; ``shapes``:
  OpenAI's reply shapes; ``generation``: one request from body to reply;
- ``routes``: the routers (OpenAI's API, llama.cpp's extras, the service's
  own); ``app``: the FastAPI application.
"""
