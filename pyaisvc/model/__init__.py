"""The model on the host: weights and their formats, the reference forward pass,
sampling, the tokenizer, the chat template."""
