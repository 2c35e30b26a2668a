"""proofcheck: train, serve and use proof verifiers.

Core (this package): the verification protocol (`protocol`, `parsing`), k-pass decisions
(`decision`), metrics (`metrics`) and the CLI. No torch or vLLM import at module level.
"""

__version__ = "0.1.0"
