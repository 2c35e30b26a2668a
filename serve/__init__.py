"""Serving the verifier with vLLM: k-pass pessimistic verification, HTTP service, client."""
