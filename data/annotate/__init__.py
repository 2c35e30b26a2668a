"""Expert annotation tool (`proofcheck annotate`): a small web app over a queue of stepped proofs.

`models` (wire + input schemas), `auth` (annotator names and tokens), `service` (queue state,
validation, journal, outputs), `routes` + `app` (FastAPI), `agreement` (inter-annotator
agreement), `static/` (the page and the vendored KaTeX). Only `app`/`routes` import FastAPI.
"""
