"""Shared building blocks with no I/O: message model, property codec, Java hashes, ids, validation."""
