"""Schemas, loaders, validation, synthetic tasks, curation and the shipped samples."""
