"""The HTTP routes, one router per audience.

- ``openai``: OpenAI's API: /v1/completions, /v1/chat/completions, /v1/models;
- ``extras``: llama.cpp's server extras: /health, /metrics, /tokenize, /detokenize;
- ``aisvc``: the service's own: the kernel's table (/v1/aisvc/table, its
  stream), the limits, the page's burst, the page at / and its files.

Every route gets the Service by dependency (pyaisvc.serve.service.get_service).
"""
