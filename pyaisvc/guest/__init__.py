"""The link to the guest: QEMU, the models in the guest, the chat over its console."""
