"""The guest's disk image: building it, checking it, images with a model."""
